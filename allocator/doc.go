// Package allocator is an exact model of PyTorch's native CUDA caching
// allocator (c10/cuda/CUDACachingAllocator.cpp, torch 2.11).
package allocator
