/* link_delay QUEUE MICROSECONDS: holds every packet of netfilter queue QUEUE (in the network
 * namespace it runs in) for MICROSECONDS, then lets it go, in the order the packets came: a
 * link's one-way delay where the kernel has no netem (tests/mpi/netns.sh's link_shape sends a
 * veth end's outgoing packets here with an NFQUEUE rule). Only the packets' metadata is
 * copied out (NFQNL_COPY_META); GSO packets stay whole; verdicts go out in batches (one
 * accepts every id up to its own). Sleeps in ppoll with a 1 ns timer slack between packets,
 * so it costs CPU per packet, not per microsecond. Prints "ready" on stdout once bound, and
 * on SIGTERM/SIGINT prints what it held: packets, the largest backlog, the mean lateness
 * past the due time. Exit 2 on bad arguments, 1 when the queue cannot be bound. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>

enum { RING = 1 << 16 };

typedef struct {
    uint32_t id[RING];
    int64_t due[RING]; /* ns, CLOCK_MONOTONIC */
    unsigned head, tail;
    int64_t delay_ns;
    int64_t early_ns; /* released this much before the due time: the mean wake-up lateness */
    uint64_t packets, released;
    int64_t late_ns_sum;
    unsigned max_backlog;
    int overflow;
} held;

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *arg)
{
    (void)msg;
    held *h = arg;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph)
        return 0;
    uint32_t id = ntohl(ph->packet_id);
    if (h->tail - h->head == RING) { /* full: let it go at once (never seen; counted) */
        h->overflow++;
        return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
    }
    h->id[h->tail % RING] = id;
    h->due[h->tail % RING] = now_ns() + h->delay_ns;
    h->tail++;
    h->packets++;
    if (h->tail - h->head > h->max_backlog)
        h->max_backlog = h->tail - h->head;
    return 0;
}

/* accepts every held packet whose time has come (one batch verdict up to the last of them).
 * A sleep ends some tens of microseconds after it was asked to on a busy machine, so the
 * wake-ups are asked for early_ns before the due time, early_ns following the lateness seen
 * (a running mean): the packets then leave at their due time on average. */
static void release(struct nfq_q_handle *qh, held *h, int64_t t)
{
    unsigned n = 0;
    while (h->head + n != h->tail && h->due[(h->head + n) % RING] <= t + h->early_ns) {
        int64_t late = t - h->due[(h->head + n) % RING];
        h->late_ns_sum += late;
        if (n == 0) /* the first is the one the sleep was for */
            h->early_ns += late / 16;
        n++;
    }
    if (h->early_ns < 0)
        h->early_ns = 0;
    if (h->early_ns > h->delay_ns / 2)
        h->early_ns = h->delay_ns / 2;
    if (!n)
        return;
    nfq_set_verdict_batch(qh, h->id[(h->head + n - 1) % RING], NF_ACCEPT);
    h->head += n;
    h->released += n;
}

int main(int argc, char **argv)
{
    char *e1, *e2;
    long q = argc == 3 ? strtol(argv[1], &e1, 10) : -1;
    double us = argc == 3 ? strtod(argv[2], &e2) : -1;
    if (argc != 3 || *e1 || *e2 || q < 0 || q > 65535 || !(us >= 0 && us <= 1e6)) {
        fprintf(stderr, "usage: link_delay QUEUE MICROSECONDS (QUEUE 0..65535, 0..1e6 us)\n");
        return 2;
    }
    static held h;
    h.delay_ns = (int64_t)(us * 1000 + 0.5);
    struct nfq_handle *nh = nfq_open();
    if (!nh) {
        perror("link_delay: nfq_open");
        return 1;
    }
    struct nfq_q_handle *qh = nfq_create_queue(nh, (uint16_t)q, on_packet, &h);
    if (!qh || nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) {
        fprintf(stderr, "link_delay: cannot bind queue %ld: %s\n", q, strerror(errno));
        return 1;
    }
    nfq_set_queue_maxlen(qh, RING);
    nfq_set_queue_flags(qh, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);
    prctl(PR_SET_TIMERSLACK, 1UL);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int fd = nfq_fd(nh), rcv = 16 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof rcv);
    printf("ready\n");
    fflush(stdout);
    static char buf[65536 + 4096];
    while (!stop) {
        int64_t t = now_ns();
        release(qh, &h, t);
        struct timespec to, *top = NULL;
        if (h.head != h.tail) {
            int64_t w = h.due[h.head % RING] - h.early_ns - t;
            w = w < 0 ? 0 : w;
            to.tv_sec = w / 1000000000;
            to.tv_nsec = w % 1000000000;
            top = &to;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = ppoll(&p, 1, top, NULL);
        if (r < 0 && errno != EINTR) {
            perror("link_delay: ppoll");
            return 1;
        }
        if (r > 0)
            for (;;) { /* everything that is there */
                ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
                if (n < 0) {
                    if (errno == ENOBUFS) { /* the kernel dropped messages: count, go on */
                        h.overflow++;
                        continue;
                    }
                    break;
                }
                nfq_handle_packet(nh, buf, (int)n);
            }
    }
    if (h.head != h.tail) /* let the rest go before the queue is unbound */
        nfq_set_verdict_batch(qh, h.id[(h.tail - 1) % RING], NF_ACCEPT);
    fprintf(stderr, "link_delay: queue %ld, %.0f us: %llu packets, backlog at most %u, "
            "%.1f us late on average (woken %.1f us early), %d overflows\n", q, us, (unsigned long long)h.packets,
            h.max_backlog, h.released ? (double)h.late_ns_sum / 1e3 / (double)h.released : 0.0, h.early_ns / 1e3,
            h.overflow);
    nfq_destroy_queue(qh);
    nfq_close(nh);
    return 0;
}
