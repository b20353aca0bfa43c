package dataplane

// The eBPF object and its Go bindings are generated at build time (make generate,
// needs clang); neither the .o nor the generated .go is committed.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -tags linux -cc clang -target bpfel -type sgw_dispatch_config -type sgw_bucket -type sgw_counter -type sgw_l2_entry -type sgw_learn_key -type sgw_flood_group -type sgw_flood_member -type sgw_event -type sgw_mac -type sgw_port_info -type sgw_ra_config -type sgw_gateway -type sgw_lpm_v4 -type sgw_ternary_table -type sgw_ternary_entry -type sgw_nd_config -type sgw_learn_ip6_key -type sgw_gateway_backup bpf ../../bpf/supergw.c -- -O2 -g -Wall -I../../bpf -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu
