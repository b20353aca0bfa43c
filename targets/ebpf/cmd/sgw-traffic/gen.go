package main

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -tags linux -cc clang -target bpfel -type sgw_gen_state traffic traffic.c -- -O2 -g -Wall -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu
