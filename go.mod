module github.com/tracer-dev/tracer

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.0-1 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/nlpodyssey/gopickle v0.3.0 // indirect
)
