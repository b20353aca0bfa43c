// Fallback traffic generator for the dataplane benchmark, used when sgw-dpbench is
// not built: AF_PACKET with PACKET_QDISC_BYPASS and sendmmsg() batches, so each
// syscall hands 256 frames straight to the driver (veth_xmit).
//
//   sgw-bench-afgen IFACE FRAMES_FILE SECONDS [RATE]
//
// FRAMES_FILE holds frames as <u16 little-endian length><bytes>...; they are sent
// round-robin. RATE (frames per second) paces the sending in bursts of PACED_BATCH,
// sleeping in between, for switches slower than the generator (BMv2): overloaded, they
// spend their time dropping. Without RATE it sends as fast as it can.
// Prints "sent <n> seconds <s>" on stdout. The caller pins the CPU.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define BATCH 256
#define PACED_BATCH 16
#define MAX_FRAMES 1024

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: %s IFACE FRAMES_FILE SECONDS [RATE]\n", argv[0]);
		return 2;
	}
	double rate = argc == 5 ? atof(argv[4]) : 0;
	if (argc == 5 && !(rate > 0)) {
		fprintf(stderr, "RATE must be a positive number of frames per second\n");
		return 2;
	}
	static unsigned char frames[MAX_FRAMES][2048];
	static size_t lens[MAX_FRAMES];
	size_t n = 0;
	FILE *f = fopen(argv[2], "rb");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	unsigned char hdr[2];
	while (n < MAX_FRAMES && fread(hdr, 1, 2, f) == 2) {
		lens[n] = hdr[0] | (hdr[1] << 8);
		if (lens[n] == 0 || lens[n] > sizeof(frames[0]) || fread(frames[n], 1, lens[n], f) != lens[n]) {
			fprintf(stderr, "%s: bad frame %zu\n", argv[2], n);
			return 1;
		}
		n++;
	}
	fclose(f);
	if (n == 0) {
		fprintf(stderr, "%s: no frames\n", argv[2]);
		return 1;
	}
	int fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (fd < 0) {
		perror("socket(AF_PACKET)");
		return 1;
	}
	int one = 1;
	if (setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)) < 0)
		perror("PACKET_QDISC_BYPASS (continuing through the qdisc)");
	struct sockaddr_ll addr = {.sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex(argv[1])};
	if (addr.sll_ifindex == 0) {
		perror(argv[1]);
		return 1;
	}
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("bind");
		return 1;
	}
	static struct mmsghdr msgs[BATCH];
	static struct iovec iovs[BATCH];
	for (int i = 0; i < BATCH; i++) {
		iovs[i].iov_base = frames[i % n];
		iovs[i].iov_len = lens[i % n];
		msgs[i].msg_hdr.msg_iov = &iovs[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	double seconds = atof(argv[3]), start = now(), end = start + seconds, t = start;
	unsigned long long sent = 0;
	while (t < end) {
		if (rate > 0) {
			double ahead = start + sent / rate - t;
			if (ahead > 0) {
				struct timespec ts = {.tv_sec = (time_t)ahead, .tv_nsec = (long)((ahead - (time_t)ahead) * 1e9)};
				nanosleep(&ts, NULL);
			} else {
				int r = sendmmsg(fd, msgs, PACED_BATCH, 0);
				if (r > 0)
					sent += (unsigned long long)r;
			}
		} else {
			for (int k = 0; k < 16; k++) {
				int r = sendmmsg(fd, msgs, BATCH, 0);
				if (r > 0)
					sent += (unsigned long long)r;
			}
		}
		t = now();
	}
	printf("sent %llu seconds %.3f\n", sent, t - start);
	return 0;
}
