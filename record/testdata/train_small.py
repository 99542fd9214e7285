"""A few steps of a small MLP on the GPU, for `tracer record -- python`.
It knows nothing of tracer: the recording is switched on from outside."""
import torch

torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 4096), torch.nn.GELU(),
    torch.nn.Linear(4096, 4096), torch.nn.GELU(),
    torch.nn.Linear(4096, 10),
).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(5):
    x = torch.randn(256 * (step + 1), 1024, device=dev)
    y = torch.randint(0, 10, (x.shape[0],), device=dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.4f}, "
          f"allocated {torch.cuda.memory_allocated() / 2**20:.1f} MiB", flush=True)
