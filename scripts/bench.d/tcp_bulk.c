// A plain TCP socket moving a file, the baseline of scripts/bench.d/86-streams: the same bytes,
// the same link and the same shape as `piconet connect NODE/sink < FILE` (the bytes go one way,
// the receiver answers with the count it read, the sender exits on that answer).
//   tcp_bulk sink PORT             accepts connections one after another; each: read to EOF,
//                                  answer "N\n" (bytes read), close
//   tcp_bulk send HOST PORT FILE   connects, writes FILE, shuts its writing half, prints the answer
// Kernel defaults throughout (buffers, Nagle, congestion control): what an application gets.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char buf[1 << 16];

static int sink(int port) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 4) < 0) { perror("tcp_bulk sink: bind/listen"); return 1; }
    printf("listening on %d\n", port);
    fflush(stdout);
    for (;;) {
        int c = accept(l, NULL, NULL);
        if (c < 0) { if (errno == EINTR) continue; perror("tcp_bulk sink: accept"); return 1; }
        long long n = 0;
        for (;;) {
            ssize_t r = read(c, buf, sizeof buf);
            if (r > 0) { n += r; continue; }
            if (r < 0 && errno == EINTR) continue;
            break;
        }
        int len = snprintf(buf, sizeof buf, "%lld\n", n);
        if (write(c, buf, len) != len) perror("tcp_bulk sink: write");
        close(c);
    }
}

static int send_file(const char *host, int port, const char *path) {
    int f = open(path, O_RDONLY);
    if (f < 0) { perror(path); return 1; }
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) { fprintf(stderr, "tcp_bulk: bad address %s\n", host); return 64; }
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("tcp_bulk send: connect"); return 1; }
    for (;;) {
        ssize_t r = read(f, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { perror(path); return 1; }
        if (r == 0) break;
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(s, buf + off, r - off);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) { perror("tcp_bulk send: write"); return 1; }
            off += w;
        }
    }
    shutdown(s, SHUT_WR);
    ssize_t r, got = 0;
    while ((r = read(s, buf + got, sizeof buf - 1 - got)) > 0) got += r;
    buf[got] = 0;
    fputs(buf, stdout);
    return got > 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "sink") == 0) return sink(atoi(argv[2]));
    if (argc == 5 && strcmp(argv[1], "send") == 0) return send_file(argv[2], atoi(argv[3]), argv[4]);
    fprintf(stderr, "usage: tcp_bulk sink PORT | tcp_bulk send HOST PORT FILE\n");
    return 64;
}
