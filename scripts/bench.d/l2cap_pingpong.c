/* Baseline for scripts/bench.d/70-l2cap: blocking L2CAP SEQPACKET ping-pong with libbluetooth,
 * no event loop. Same protocol as piconet-l2cap-probe echo/ping.
 *   l2cap_pingpong echo ADAPTER_ADDR PSM le|bredr          (prints "ready", echoes until killed)
 *   l2cap_pingpong ping ADAPTER_ADDR PEER_ADDR PSM le|bredr COUNT SIZE
 *                                                          (20 warm-up; prints "P50_US P99_US") */
#include <bluetooth/bluetooth.h>
#include <bluetooth/l2cap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) { perror(what); exit(2); }

static struct sockaddr_l2 addr(const char *a, int psm, int le) {
	struct sockaddr_l2 s;
	memset(&s, 0, sizeof(s));
	s.l2_family = AF_BLUETOOTH;
	s.l2_psm = htobs(psm);
	s.l2_bdaddr_type = le ? BDADDR_LE_PUBLIC : BDADDR_BREDR;
	str2ba(a, &s.l2_bdaddr);
	return s;
}

static long long now_us(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp(const void *a, const void *b) {
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
	static unsigned char buf[65536];
	if (argc >= 5 && !strcmp(argv[1], "echo")) {
		int le = !strcmp(argv[4], "le");
		int s = socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP);
		struct sockaddr_l2 a = addr(argv[2], atoi(argv[3]), le);
		if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 4) < 0) die("listen");
		printf("ready\n");
		fflush(stdout);
		for (;;) {
			int c = accept(s, NULL, NULL);
			if (c < 0) die("accept");
			ssize_t n;
			while ((n = recv(c, buf, sizeof(buf), 0)) > 0)
				if (send(c, buf, n, 0) != n) break;
			close(c);
		}
	}
	if (argc == 8 && !strcmp(argv[1], "ping")) {
		int le = !strcmp(argv[5], "le"), count = atoi(argv[6]), size = atoi(argv[7]);
		int s = socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP);
		struct sockaddr_l2 local = addr(argv[2], 0, le), peer = addr(argv[3], atoi(argv[4]), le);
		if (s < 0 || bind(s, (struct sockaddr *)&local, sizeof(local)) < 0) die("bind");
		if (connect(s, (struct sockaddr *)&peer, sizeof(peer)) < 0) die("connect");
		long long *t = calloc(count + 20, sizeof(long long));
		memset(buf, 0x5a, size);
		for (int i = 0; i < count + 20; i++) {
			long long t0 = now_us();
			if (send(s, buf, size, 0) != size) die("send");
			if (recv(s, buf, sizeof(buf), 0) <= 0) die("recv");
			t[i] = now_us() - t0;
		}
		qsort(t + 20, count, sizeof(long long), cmp);
		printf("%lld %lld\n", t[20 + count / 2], t[20 + (count * 99 / 100 < count - 1 ? count * 99 / 100 : count - 1)]);
		return 0;
	}
	fprintf(stderr, "usage: see the header of l2cap_pingpong.c\n");
	return 2;
}
