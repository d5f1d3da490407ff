/*
 * cmd_verify.c - `cairnctl verify` (issue #7): runs transactional writers,
 * read-process-write workers and a tailing read_committed reader as child
 * processes (verify_worker.c) while a seeded fault schedule kills, pauses
 * and restarts them (and the broker, when --broker-cmd lets us own it),
 * then drains, reads every partition read_committed and read_uncommitted,
 * and hands the histories to the checker (verify_check.c).
 *
 * --cluster (issues #14, #15) owns several brokers instead, one
 * --broker-cmd each, creates the topics replicated to all of them
 * (min.insync.replicas one less), and runs the same transactional writers
 * and read-process-write workers (or, with --idempotent, idempotent
 * acks=all writers) with two tailing readers: read_committed, and
 * read_uncommitted, whose every record must stay in the final log.  It
 * disturbs brokers: kills any one (kill-broker) or the leader of a
 * partition being written while its followers lag (kill-leader), pauses
 * one past its session timeout (pause-broker), cuts one off the network
 * (partition-broker: --netns runs each broker in a network namespace,
 * verify_net.c), crashes a transaction coordinator at a commit fail point
 * (crash-mid-commit), and, through a proxy in front of the writers'
 * connections (--proxy, verify_proxy.c), holds a Produce or an EndTxn
 * past the transaction timeout (delay-produce, delay-endtxn: KIP-890's
 * race).  One broker at most is disturbed at a time; a killed one comes
 * back once its partitions have new leaders.
 *
 * Exit: 0 no anomaly, 1 anomalies (or the run failed), 2 bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli/cli.h"
#include "cli/verify.h"
#include "cli/verify_net.h"
#include "cli/verify_proxy.h"

#define MAX_WORKERS 32
#define MAX_BROKERS 9
#define WAIT_MS 60000 /* longest wait for a drain or an end offset */
#define BROKER_DOWN_MS 2000    /* cluster: least time a broker is down */
#define FAILOVER_WAIT_MS 30000 /* cluster: longest wait for new leaders */

enum fault {
    FAULT_KILL_WORKER,
    FAULT_PAUSE_WORKER,
    FAULT_KILL_BROKER,
    FAULT_CRASH_MID_COMMIT,
    FAULT_KILL_LEADER,
    FAULT_PAUSE_BROKER,
    FAULT_PARTITION_BROKER,
    FAULT_DELAY_PRODUCE,
    FAULT_DELAY_ENDTXN,
    NFAULTS,
};

static const char *const fault_names[NFAULTS] = {
    "kill-worker",      "pause-worker",  "kill-broker",
    "crash-mid-commit", "kill-leader",   "pause-broker",
    "partition-broker", "delay-produce", "delay-endtxn",
};

/* How the one disturbed broker of cluster mode is disturbed. */
enum disturb {
    DOWN_KILLED, /* kill -9: restarts once its partitions moved */
    DOWN_PAUSED, /* SIGSTOP past the session timeout: SIGCONT after */
    DOWN_CUT,    /* its veth down (--netns): set up again after */
};

static volatile sig_atomic_t interrupted; /* SIGINT, SIGTERM, SIGHUP */

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* Cairn's coordinator fail points, one per step of a commit or abort:
 * crash-mid-commit restarts the broker with one of them armed, so it dies
 * at that step of the next transaction that reaches it. */
static const char *const commit_failpoints[] = {
    "txn.after_prepare_sync=crash",
    "txn.after_some_markers=crash",
    "txn.after_markers_before_complete=crash",
};

struct child {
    const char *role; /* writer, rpw, tail */
    int id;           /* number within the role */
    int inc;          /* incarnation */
    pid_t pid;        /* 0 when not running */
    bool paused;      /* SIGSTOPped by us */
};

/* A broker we own: started by cmd (via /bin/sh) in its own process
 * group, listening on addr. */
struct bproc {
    const char *cmd; /* --broker-cmd */
    char addr[128];  /* its HOST:PORT in --bootstrap-server */
    pid_t pid;       /* process group, 0 when not running */
    int32_t node_id; /* cluster: as Metadata names it, -1 until seen */
};

struct run {
    const char *bootstrap;      /* HOST:PORT[,HOST:PORT...] */
    const char *command_config; /* --command-config FILE or NULL */
    const char *broker_cmd; /* NULL: we do not own the broker */
    bool cluster;           /* --cluster */
    bool idempotent;        /* --idempotent: writers without transactions */
    int ntails;             /* tailing readers: kids[0..ntails-1] */
    struct bproc bk[MAX_BROKERS]; /* the brokers we own */
    int nbk;
    int down;                  /* cluster: index of the broker disturbed, -1 */
    enum disturb down_how;     /* how */
    int64_t down_since;        /* since when (monotonic ms) */
    int64_t session_ms;        /* the brokers' broker.session.timeout.ms */
    int64_t pause_ms;          /* pause-broker: how long */
    int64_t cut_ms;            /* partition-broker: how long */
    const char *netns;         /* --netns PREFIX, or NULL */
    char netlog[320];          /* what ip(8) said, in dir */
    int armed_bk;              /* broker started with r->armed, -1 for none */
    int cmc_victim;            /* crash-mid-commit: broker to kill next, -1 */
    int32_t cmc_part;          /* the __transaction_state partition it leads */
    int64_t cmc_since;         /* when the armed broker was started */
    int64_t unexpected_exits;  /* broker deaths nobody asked for */
    int64_t t0;                /* start (monotonic ms), for note() */
    enum fault round[NFAULTS]; /* faults left in this round, last first */
    int nround;
    int64_t settle_until; /* no broker fault before (monotonic ms) */
    const char *proxy_listen[CN_VPROXY_MAX]; /* --proxy LISTEN=TARGET */
    const char *proxy_target[CN_VPROXY_MAX];
    int nproxy;
    int64_t hold_ms; /* delay-produce, delay-endtxn: --hold-ms */
    char writer_bootstrap[CN_VPROXY_MAX * 64]; /* the proxy's addresses */
    struct cn_vproxy *proxy;                   /* running, or NULL */
    int64_t lag_ms;         /* kill-leader: how long followers lag first */
    rd_kafka_t *meta;       /* cluster: Metadata queries */
    int64_t *last_ack;      /* cluster: per input partition, last ack seen */
    int64_t ack_stall_ms;   /* longest time a partition took no ack */
    int32_t ack_stall_part; /* which one */
    long hist_pos[MAX_WORKERS]; /* how far writer histories were read */
    bool json;              /* --json */
    int64_t duration_ms;    /* of the fault phase */
    unsigned seed;          /* fault schedule */
    bool faults[NFAULTS];   /* enabled kinds */
    int writers, rpws;      /* worker counts */
    int partitions;         /* per topic */
    int txn_timeout_ms;     /* workers' transaction.timeout.ms */
    int64_t fault_every_ms; /* mean gap between faults */
    int64_t stall_bound_ms; /* longest allowed end-offset catch-up */
    char dir[256];          /* histories and logs */
    char in[64], out[64], group[64]; /* topic and group names */
    struct child kids[MAX_WORKERS];
    int nkids;
    const char *armed;    /* CAIRN_FAILPOINTS of the running broker */
    int64_t failpoint_crashes; /* broker deaths at an armed point */
    int64_t injected[NFAULTS]; /* faults by kind */
    int64_t restarts;     /* workers restarted after exiting */
    int64_t stall_ms;     /* longest end-offset catch-up seen */
};

static const char *self_exe = "/proc/self/exe";

/* ---- processes ---- */

/* Where child c writes its history (verify.h's lines). */
static void hist_path(const struct run *r, const struct child *c, char *buf,
                      size_t len)
{
    snprintf(buf, len, "%s/%s%d.hist", r->dir, c->role, c->id);
}

static int spawn(struct run *r, struct child *c)
{
    char hist[320], log[320], id[16], inc[16], parts[16], tmo[16];
    pid_t pid;

    hist_path(r, c, hist, sizeof hist);
    snprintf(log, sizeof log, "%s/%s%d.log", r->dir, c->role, c->id);
    snprintf(id, sizeof id, "%d", c->id);
    snprintf(inc, sizeof inc, "%d", c->inc);
    snprintf(parts, sizeof parts, "%d", r->partitions);
    snprintf(tmo, sizeof tmo, "%d", r->txn_timeout_ms);
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        const char *argv[40] = {"cairnctl",
                                "verify-worker",
                                "--role",
                                c->role,
                                "--bootstrap-server",
                                r->proxy && !strcmp(c->role, "writer")
                                    ? r->writer_bootstrap
                                    : r->bootstrap,
                                "--in",
                                r->in,
                                "--out",
                                r->out,
                                "--group",
                                r->group,
                                "--id",
                                id,
                                "--inc",
                                inc,
                                "--partitions",
                                parts,
                                "--txn-timeout-ms",
                                tmo,
                                "--history",
                                hist};
        int n = 22;
        FILE *f = freopen(log, "a", stderr);
        (void)f;
        /* Killed with us, even by SIGKILL (a test's timeout). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(2, 1);
        if (r->idempotent) {
            argv[n++] = "--idempotent";
            argv[n++] = "1";
        }
        /* Cluster mode's second tailing reader reads read_uncommitted:
         * what it saw must stay in the final log (vanished). */
        if (!strcmp(c->role, "tail") && c->id == 1) {
            argv[n++] = "--isolation";
            argv[n++] = "read_uncommitted";
        }
        if (r->command_config) {
            argv[n++] = "--command-config";
            argv[n++] = r->command_config;
        }
        argv[n] = NULL;
        execv(self_exe, (char *const *)argv);
        _exit(127);
    }
    c->pid = pid;
    c->paused = false;
    return 0;
}

static void kill_child(struct child *c, int sig)
{
    if (c->pid <= 0)
        return;
    if (c->paused)
        kill(c->pid, SIGCONT);
    kill(c->pid, sig);
    waitpid(c->pid, NULL, 0);
    c->pid = 0;
    c->paused = false;
}

/* SIGTERM, then SIGKILL after wait_ms. */
static void stop_child(struct child *c, int64_t wait_ms)
{
    int64_t end = cn_clock_mono_ms() + wait_ms;

    if (c->pid <= 0)
        return;
    if (c->paused)
        kill(c->pid, SIGCONT);
    c->paused = false;
    kill(c->pid, SIGTERM);
    while (cn_clock_mono_ms() < end) {
        if (waitpid(c->pid, NULL, WNOHANG) == c->pid) {
            c->pid = 0;
            return;
        }
        usleep(50000);
    }
    kill_child(c, SIGKILL);
}

/* Restarts workers that exited (fenced, or a client error). */
static void reap(struct run *r)
{
    for (int i = 0; i < r->nkids; i++) {
        struct child *c = &r->kids[i];
        if (c->pid > 0 && waitpid(c->pid, NULL, WNOHANG) == c->pid) {
            c->inc++;
            r->restarts++;
            spawn(r, c);
        }
    }
}

static bool port_open(const char *bootstrap)
{
    char host[256];
    const char *colon = strrchr(bootstrap, ':');
    struct addrinfo hints, *ai = NULL;
    bool ok = false;
    int fd;

    if (!colon || (size_t)(colon - bootstrap) >= sizeof host)
        return false;
    memcpy(host, bootstrap, (size_t)(colon - bootstrap));
    host[colon - bootstrap] = '\0';
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, colon + 1, &hints, &ai) || !ai)
        return false;
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        ok = true;
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return ok;
}

/* Starts broker i and waits (bounded) until it listens. */
static int start_broker_at(struct run *r, int i)
{
    struct bproc *bp = &r->bk[i];
    char log[320];
    int64_t end;
    pid_t pid;

    if (r->cluster)
        snprintf(log, sizeof log, "%s/broker%d.log", r->dir, i + 1);
    else
        snprintf(log, sizeof log, "%s/broker.log", r->dir);
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        FILE *f;
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* see spawn() */
        f = freopen(log, "a", stderr);
        (void)f;
        dup2(2, 1);
        if (r->armed && r->armed_bk == i)
            setenv("CAIRN_FAILPOINTS", r->armed, 1);
        if (r->netns) {
            char ns[32];
            cn_vnet_ns(r->netns, i, ns, sizeof ns);
            execlp("ip", "ip", "netns", "exec", ns, "/bin/sh", "-c", bp->cmd,
                   (char *)NULL);
            _exit(127);
        }
        execl("/bin/sh", "sh", "-c", bp->cmd, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    bp->pid = pid;
    end = cn_clock_mono_ms() + 30000;
    while (!port_open(bp->addr)) {
        if (waitpid(pid, NULL, WNOHANG) == pid || cn_clock_mono_ms() > end ||
            interrupted) {
            fprintf(stderr, "cairnctl verify: broker did not start; see %s\n",
                    log);
            kill(-pid, SIGKILL);
            waitpid(pid, NULL, WNOHANG);
            bp->pid = 0;
            return -1;
        }
        usleep(50000);
    }
    return 0;
}

static int start_broker(struct run *r)
{
    return start_broker_at(r, 0);
}

/* Sends sig to every broker in mask, and waits for them all (SIGKILL
 * after 15 s). */
static void stop_brokers(struct run *r, unsigned mask, int sig)
{
    int64_t end = cn_clock_mono_ms() + 15000;

    for (int i = 0; i < r->nbk; i++)
        if ((mask >> i & 1) && r->bk[i].pid > 0) {
            kill(-r->bk[i].pid, SIGCONT);
            kill(-r->bk[i].pid, sig);
        }
    for (int i = 0; i < r->nbk; i++) {
        pid_t pid = r->bk[i].pid;
        if (!(mask >> i & 1) || pid <= 0)
            continue;
        while (waitpid(pid, NULL, WNOHANG) != pid) {
            if (cn_clock_mono_ms() > end) {
                kill(-pid, SIGKILL);
                waitpid(pid, NULL, 0);
                break;
            }
            usleep(20000);
        }
        /* The shell may have left the broker itself behind in the group. */
        kill(-pid, SIGKILL);
        r->bk[i].pid = 0;
    }
}

static void stop_broker(struct run *r, int sig)
{
    stop_brokers(r, 1u, sig);
}

/* ---- librdkafka helpers ---- */

static rd_kafka_t *client(const struct run *r, rd_kafka_type_t type,
                          const char *group, const char *isolation)
{
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    char err[256];
    rd_kafka_t *rk;

    rd_kafka_conf_set(c, "bootstrap.servers", r->bootstrap, err, sizeof err);
    /* Cluster mode kills brokers: refused connections are expected. */
    rd_kafka_conf_set(c, "log_level", r->cluster ? "2" : "3", err, sizeof err);
    if (cli_verify_apply_sec(c, r->command_config)) {
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    if (type == RD_KAFKA_CONSUMER) {
        rd_kafka_conf_set(c, "group.id", group, err, sizeof err);
        rd_kafka_conf_set(c, "isolation.level", isolation, err, sizeof err);
        rd_kafka_conf_set(c, "enable.auto.commit", "false", err, sizeof err);
        rd_kafka_conf_set(c, "enable.partition.eof", "true", err,
                          sizeof err);
        rd_kafka_conf_set(c, "auto.offset.reset", "earliest", err,
                          sizeof err);
    }
    rk = rd_kafka_new(type, c, err, sizeof err);
    if (!rk)
        fprintf(stderr, "cairnctl verify: %s\n", err);
    else if (type == RD_KAFKA_CONSUMER)
        rd_kafka_poll_set_consumer(rk);
    return rk;
}

/* One CreateTopics of both topics; retry is set when a broker may just
 * not be ready (cluster mode: every broker must have registered before
 * a topic can have them all as replicas). */
static int create_topics_once(struct run *r, rd_kafka_t *rk, bool again,
                              bool *retry, char *why, size_t why_len)
{
    int rf = r->cluster ? r->nbk : 1;
    rd_kafka_NewTopic_t *nt[2];
    rd_kafka_AdminOptions_t *opts;
    rd_kafka_queue_t *q;
    rd_kafka_event_t *ev;
    const rd_kafka_CreateTopics_result_t *res;
    const rd_kafka_topic_result_t **tr;
    size_t n = 0;
    char err[256], minisr[16];
    int rc = 0;

    *retry = false;
    snprintf(minisr, sizeof minisr, "%d", rf > 1 ? rf - 1 : 1);
    nt[0] = rd_kafka_NewTopic_new(r->in, r->partitions, rf, err, sizeof err);
    nt[1] = rd_kafka_NewTopic_new(r->out, r->partitions, rf, err, sizeof err);
    for (int i = 0; r->cluster && i < 2; i++)
        rd_kafka_NewTopic_set_config(nt[i], "min.insync.replicas", minisr);
    q = rd_kafka_queue_new(rk);
    /* A cluster still electing its controller answers late: ask again. */
    opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_request_timeout(opts, 10000, err, sizeof err);
    rd_kafka_CreateTopics(rk, nt, 2, opts, q);
    ev = rd_kafka_queue_poll(q, 15000);
    res = ev && !rd_kafka_event_error(ev)
              ? rd_kafka_event_CreateTopics_result(ev)
              : NULL;
    if (!res) {
        snprintf(why, why_len, "CreateTopics: %s",
                 ev ? rd_kafka_event_error_string(ev) : "timed out");
        *retry = true;
        rc = -1;
    } else {
        tr = rd_kafka_CreateTopics_result_topics(res, &n);
        for (size_t i = 0; i < n; i++) {
            rd_kafka_resp_err_t e = rd_kafka_topic_result_error(tr[i]);
            /* A retry may find what an earlier try created. */
            if (!e || (again && e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS))
                continue;
            snprintf(why, why_len, "create %s: %s",
                     rd_kafka_topic_result_name(tr[i]),
                     rd_kafka_topic_result_error_string(tr[i]));
            *retry = true;
            rc = -1;
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_NewTopic_destroy_array(nt, 2);
    rd_kafka_queue_destroy(q);
    return rc;
}

static int create_topics(struct run *r)
{
    rd_kafka_t *rk = client(r, RD_KAFKA_PRODUCER, NULL, NULL);
    int64_t give_up = cn_clock_mono_ms() + (r->cluster ? WAIT_MS : 0);
    char why[512] = "";
    bool retry;
    int rc;

    if (!rk)
        return -1;
    for (bool again = false;; again = true) {
        rc = create_topics_once(r, rk, again, &retry, why, sizeof why);
        if (!rc || !retry || cn_clock_mono_ms() >= give_up)
            break;
        usleep(500000);
    }
    if (rc)
        fprintf(stderr, "cairnctl verify: %s\n", why);
    rd_kafka_destroy(rk);
    return rc;
}

/* Largest gap between the read_committed end and the high watermark over
 * the partitions of topic, or -1 when the broker did not answer. */
static int64_t end_gap(struct run *r, rd_kafka_t *ru, rd_kafka_t *rc,
                       const char *topic)
{
    int64_t gap = 0;

    for (int32_t p = 0; p < r->partitions; p++) {
        int64_t lo, hw, lso;
        if (rd_kafka_query_watermark_offsets(ru, topic, p, &lo, &hw, 5000) ||
            rd_kafka_query_watermark_offsets(rc, topic, p, &lo, &lso, 5000))
            return -1;
        if (hw - lso > gap)
            gap = hw - lso;
    }
    return gap;
}

/* Waits until read_committed ends reach the high watermarks of the
 * topics; records how long it took. */
static void wait_stable(struct run *r, const char *t1, const char *t2)
{
    rd_kafka_t *ru = client(r, RD_KAFKA_CONSUMER, "verify-probe",
                            "read_uncommitted");
    rd_kafka_t *rc = client(r, RD_KAFKA_CONSUMER, "verify-probe",
                            "read_committed");
    int64_t start = cn_clock_mono_ms(), took;

    while (ru && rc && cn_clock_mono_ms() - start < r->stall_bound_ms + 5000) {
        if (end_gap(r, ru, rc, t1) == 0 && (!t2 || end_gap(r, ru, rc, t2) == 0))
            break;
        usleep(100000);
    }
    took = cn_clock_mono_ms() - start;
    if (took > r->stall_ms)
        r->stall_ms = took;
    if (ru)
        rd_kafka_destroy(ru);
    if (rc)
        rd_kafka_destroy(rc);
}

/*
 * Reads every partition of the topics from the start to its end (EOF) with
 * one isolation level, feeding vc when given; last[p] gets one past the
 * last input record read.  Returns 0, or -1 if some partition never
 * reached its end.
 */
static int read_all(struct run *r, struct cn_vcheck *vc, bool committed,
                    int64_t *last)
{
    rd_kafka_t *rk = client(r, RD_KAFKA_CONSUMER, "verify-final",
                            committed ? "read_committed"
                                      : "read_uncommitted");
    rd_kafka_topic_partition_list_t *parts;
    int64_t end = cn_clock_mono_ms() + WAIT_MS;
    int eofs = 0, want = 2 * r->partitions;
    char *eof_seen;
    char val[1024];

    if (!rk)
        return -1;
    eof_seen = calloc((size_t)want, 1);
    parts = rd_kafka_topic_partition_list_new(want);
    for (int32_t p = 0; p < r->partitions; p++) {
        rd_kafka_topic_partition_list_add(parts, r->in, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_topic_partition_list_add(parts, r->out, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
        if (last)
            last[p] = 0;
    }
    rd_kafka_assign(rk, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    while (eofs < want && cn_clock_mono_ms() < end) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        bool is_in;
        int slot;

        if (!m)
            continue;
        is_in = !strcmp(rd_kafka_topic_name(m->rkt), r->in);
        slot = m->partition * 2 + (is_in ? 0 : 1);
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (m->partition < r->partitions && !eof_seen[slot]) {
                eof_seen[slot] = 1;
                eofs++;
            }
        } else if (!m->err) {
            snprintf(val, sizeof val, "%.*s", (int)m->len,
                     (const char *)m->payload);
            if (vc)
                cn_vcheck_read(vc,
                               committed ? CN_VC_FINAL_RC : CN_VC_FINAL_RU,
                               rd_kafka_topic_name(m->rkt), m->partition,
                               m->offset, val);
            if (last && is_in && m->partition < r->partitions)
                last[m->partition] = m->offset + 1;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    free(eof_seen);
    if (eofs < want) {
        fprintf(stderr, "cairnctl verify: %s read did not reach the end\n",
                committed ? "read_committed" : "read_uncommitted");
        return -1;
    }
    return 0;
}

/* The rpw group's committed offsets of the input (-1 for none). */
static int group_offsets(struct run *r, int64_t *off)
{
    rd_kafka_t *rk = client(r, RD_KAFKA_CONSUMER, r->group,
                            "read_committed");
    rd_kafka_topic_partition_list_t *parts;
    int rc = 0;

    if (!rk)
        return -1;
    parts = rd_kafka_topic_partition_list_new(r->partitions);
    for (int32_t p = 0; p < r->partitions; p++)
        rd_kafka_topic_partition_list_add(parts, r->in, p);
    if (rd_kafka_committed(rk, parts, 10000))
        rc = -1;
    for (int i = 0; !rc && i < parts->cnt; i++)
        off[parts->elems[i].partition] = parts->elems[i].offset;
    rd_kafka_topic_partition_list_destroy(parts);
    rd_kafka_destroy(rk);
    return rc;
}

/* ---- cluster mode ---- */

/*
 * Asks Metadata: learns each broker's node id (by its port), fills
 * leaders[p] with the leader of input partition p (-1 for none) when
 * leaders is given, and sets *healthy when every broker is registered and
 * every partition of both topics has a leader and all of them in its
 * ISR.  Returns 0, or -1 when no broker answered.
 */
static int cluster_state(struct run *r, int32_t *leaders, bool *healthy)
{
    const struct rd_kafka_metadata *md = NULL;
    bool ok;
    int seen = 0;

    *healthy = false;
    if (leaders)
        for (int32_t p = 0; p < r->partitions; p++)
            leaders[p] = -1;
    if (!r->meta || rd_kafka_metadata(r->meta, 1, NULL, &md, 5000) || !md)
        return -1;
    for (int j = 0; j < md->broker_cnt; j++) {
        for (int i = 0; i < r->nbk; i++) {
            const char *colon = strrchr(r->bk[i].addr, ':');
            if (colon && atoi(colon + 1) == md->brokers[j].port)
                r->bk[i].node_id = md->brokers[j].id;
        }
    }
    ok = md->broker_cnt == r->nbk;
    for (int t = 0; t < md->topic_cnt; t++) {
        const struct rd_kafka_metadata_topic *mt = &md->topics[t];
        bool in = !strcmp(mt->topic, r->in);

        if (!in && strcmp(mt->topic, r->out))
            continue;
        seen++;
        if (mt->err || mt->partition_cnt != r->partitions)
            ok = false;
        for (int k = 0; k < mt->partition_cnt; k++) {
            const struct rd_kafka_metadata_partition *mp = &mt->partitions[k];
            if (mp->err || mp->leader < 0 || mp->isr_cnt != r->nbk)
                ok = false;
            if (leaders && in && mp->id >= 0 && mp->id < r->partitions)
                leaders[mp->id] = mp->err ? -1 : mp->leader;
        }
    }
    *healthy = ok && seen == 2;
    rd_kafka_metadata_destroy(md);
    return 0;
}

static int broker_of_node(const struct run *r, int32_t node)
{
    for (int i = 0; i < r->nbk; i++)
        if (node >= 0 && r->bk[i].node_id == node)
            return i;
    return -1;
}

/* Waits (bounded) until cluster_state says healthy. */
static bool await_healthy(struct run *r, int64_t wait_ms);

/*
 * Reads what the writers appended to their histories since the last
 * call: an acknowledged write (W line) to input partition p means p took
 * writes at now.  Records the longest time a partition went without.
 */
static void scan_acks(struct run *r, int64_t now)
{
    char path[320], line[1200], txn[128], topic[128];

    for (int i = 0; i < r->nkids; i++) {
        const struct child *c = &r->kids[i];
        FILE *f;

        if (strcmp(c->role, "writer"))
            continue;
        hist_path(r, c, path, sizeof path);
        f = fopen(path, "r");
        if (!f)
            continue;
        if (fseek(f, r->hist_pos[i], SEEK_SET) == 0) {
            while (fgets(line, sizeof line, f)) {
                size_t len = strlen(line);
                int32_t part;
                /* Not all written yet: read again next time. */
                if (!len || line[len - 1] != '\n')
                    break;
                r->hist_pos[i] += (long)len;
                if (line[0] == 'W' &&
                    sscanf(line, "W %127s %127s %" SCNd32, txn, topic,
                           &part) == 3 &&
                    !strcmp(topic, r->in) && part >= 0 && part < r->partitions)
                    r->last_ack[part] = now;
            }
        }
        fclose(f);
    }
    for (int32_t p = 0; p < r->partitions; p++) {
        if (now - r->last_ack[p] > r->ack_stall_ms) {
            r->ack_stall_ms = now - r->last_ack[p];
            r->ack_stall_part = p;
        }
    }
}

/* One line on stderr per broker fault, for whoever reads the logs. */
__attribute__((format(printf, 2, 3))) static void note(const struct run *r,
                                                       const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "cairnctl verify: +%.1fs ",
            (double)(cn_clock_mono_ms() - r->t0) / 1000.0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void kill_broker_now(struct run *r, int i)
{
    note(r, "broker %d killed (-9)", i + 1);
    if (r->bk[i].pid <= 0)
        return;
    kill(-r->bk[i].pid, SIGKILL);
    waitpid(r->bk[i].pid, NULL, 0);
    r->bk[i].pid = 0;
    r->down = i;
    r->down_how = DOWN_KILLED;
    r->down_since = cn_clock_mono_ms();
}

/* Whether a broker may be disturbed now: none is, no crash-mid-commit
 * step is pending, and no broker restarted within a session timeout (it
 * may not have been fenced yet, so Metadata's ISRs would still count it). */
static bool may_disturb(const struct run *r)
{
    return r->down < 0 && r->cmc_victim < 0 &&
           cn_clock_mono_ms() >= r->settle_until;
}

/* Kafka's Utils.abs(transactionalId.hashCode) % partitions: where the
 * coordinator of a transactional id keeps its state. */
static int32_t txn_partition_for(const char *tid, int32_t partitions)
{
    uint32_t h = 0;
    int32_t sh;

    for (const unsigned char *p = (const unsigned char *)tid; *p; p++)
        h = 31 * h + *p;
    memcpy(&sh, &h, sizeof sh);
    sh = sh == INT32_MIN ? 0 : sh < 0 ? -sh : sh;
    return sh % partitions;
}

/*
 * Where the coordinator of transactional id tid is: *part its
 * __transaction_state partition, *leader the index of the broker leading
 * it, *next the broker Kafka's election rule (meta/elect.c: the first
 * replica in assignment order that is in the ISR) picks when the leader
 * dies, *next_in_isr whether it is in the ISR now.  Returns 0, or -1 when
 * Metadata does not say (no answer, no such topic yet, a broker we do not
 * own).
 */
static int txn_coordinator(struct run *r, const char *tid, int32_t *part,
                           int *leader, int *next, bool *next_in_isr)
{
    const struct rd_kafka_metadata *md = NULL;
    int rc = -1;

    if (!r->meta || rd_kafka_metadata(r->meta, 1, NULL, &md, 5000) || !md)
        return -1;
    for (int t = 0; t < md->topic_cnt; t++) {
        const struct rd_kafka_metadata_topic *mt = &md->topics[t];
        const struct rd_kafka_metadata_partition *mp = NULL;

        if (strcmp(mt->topic, "__transaction_state") || mt->err ||
            mt->partition_cnt <= 0)
            continue;
        *part = txn_partition_for(tid, mt->partition_cnt);
        for (int k = 0; k < mt->partition_cnt; k++)
            if (mt->partitions[k].id == *part)
                mp = &mt->partitions[k];
        if (!mp || mp->err || mp->leader < 0)
            break;
        *leader = broker_of_node(r, mp->leader);
        *next = -1;
        for (int k = 0; k < mp->replica_cnt && *next < 0; k++)
            if (mp->replicas[k] != mp->leader)
                *next = broker_of_node(r, mp->replicas[k]);
        *next_in_isr = false;
        for (int k = 0; *next >= 0 && k < mp->isr_cnt; k++)
            if (mp->isrs[k] == r->bk[*next].node_id)
                *next_in_isr = true;
        if (*leader >= 0 && *next >= 0 && *leader != *next)
            rc = 0;
        break;
    }
    rd_kafka_metadata_destroy(md);
    return rc;
}

/*
 * kill-broker and kill-leader in cluster mode.  Only one broker is ever
 * down, and only when every partition has its full ISR, so min.insync
 * keeps writes going and no kill takes the last copy of anything
 * acknowledged.  Returns false when now is no time for it (try again).
 */
static bool cluster_kill(struct run *r, unsigned *seed, bool leader)
{
    int32_t leaders[64];
    bool healthy;
    int victim;

    if (!may_disturb(r) || cluster_state(r, leaders, &healthy) || !healthy)
        return false;
    if (!leader) {
        victim = (int)(rand_r(seed) % (unsigned)r->nbk);
        if (r->bk[victim].pid <= 0)
            return false;
        kill_broker_now(r, victim);
        return true;
    }
    victim = broker_of_node(r,
                            leaders[rand_r(seed) % (unsigned)r->partitions]);
    if (victim < 0 || r->bk[victim].pid <= 0)
        return false;
    /* Its followers stop fetching for a moment while the writers go on:
     * whatever the leader acknowledges meanwhile only it holds when it
     * dies, unless acks=all waited for the ISR, as it must. */
    for (int i = 0; i < r->nbk; i++)
        if (i != victim && r->bk[i].pid > 0)
            kill(-r->bk[i].pid, SIGSTOP);
    usleep((useconds_t)r->lag_ms * 1000);
    kill_broker_now(r, victim);
    for (int i = 0; i < r->nbk; i++)
        if (i != victim && r->bk[i].pid > 0)
            kill(-r->bk[i].pid, SIGCONT);
    return true;
}

/*
 * pause-broker (SIGSTOP for --pause-ms, past the session timeout, so the
 * controller fences it and its partitions and coordinators move; after
 * SIGCONT it must notice it was deposed) and partition-broker (its veth
 * down for --partition-ms: the same, but the process runs on, cut off
 * from the others and the clients).  Like cluster_kill, only with every
 * ISR full and nobody else disturbed.
 */
static bool cluster_disturb(struct run *r, unsigned *seed, enum disturb how)
{
    bool healthy;
    int victim;

    if (!may_disturb(r) || cluster_state(r, NULL, &healthy) || !healthy)
        return false;
    victim = (int)(rand_r(seed) % (unsigned)r->nbk);
    if (r->bk[victim].pid <= 0)
        return false;
    if (how == DOWN_PAUSED) {
        kill(-r->bk[victim].pid, SIGSTOP);
    } else if (cn_vnet_run(CN_VNET_CUT, r->netns, r->nbk, victim, r->netlog)) {
        fprintf(stderr, "cairnctl verify: could not cut broker %d off\n",
                victim + 1);
        return false;
    }
    note(r, "broker %d %s", victim + 1,
         how == DOWN_PAUSED ? "paused (SIGSTOP)" : "cut off the network");
    r->down = victim;
    r->down_how = how;
    r->down_since = cn_clock_mono_ms();
    return true;
}

/*
 * crash-mid-commit in cluster mode.  The armed broker must coordinate a
 * commit, and a restarted broker leads nothing until someone else fails,
 * so this is two steps: restart (kill -9) the broker that takes over the
 * coordinator of one of our transactional ids when its leader dies, with
 * a commit fail point armed; then, once it is back in that partition's
 * ISR, kill the coordinator (cmc_step).  The armed broker then dies at
 * that step of the next commit it coordinates, and fault_phase restarts
 * it clean; the killed coordinator restarts as after kill-broker, so for
 * a moment two brokers can be down.
 */
static bool cluster_crash_mid_commit(struct run *r, unsigned *seed)
{
    char tid[32];
    int n = (r->idempotent ? 0 : r->writers) + r->rpws, k, leader, next;
    int32_t part;
    bool healthy, in_isr;

    if (!may_disturb(r) || n == 0 || cluster_state(r, NULL, &healthy) ||
        !healthy)
        return false;
    k = (int)(rand_r(seed) % (unsigned)n);
    if (!r->idempotent && k < r->writers)
        snprintf(tid, sizeof tid, "verify-w%d", k);
    else
        snprintf(tid, sizeof tid, "verify-r%d",
                 k - (r->idempotent ? 0 : r->writers));
    if (txn_coordinator(r, tid, &part, &leader, &next, &in_isr) ||
        r->bk[leader].pid <= 0)
        return false;
    /* An earlier arming that never fired is restarted clean first. */
    if (r->armed_bk >= 0 && r->armed_bk != next) {
        int old = r->armed_bk;
        stop_brokers(r, 1u << old, SIGKILL);
        r->armed_bk = -1;
        start_broker_at(r, old);
        r->settle_until = cn_clock_mono_ms() + r->session_ms + 500;
        return false;
    }
    stop_brokers(r, 1u << next, SIGKILL);
    r->armed_bk = next;
    r->armed = commit_failpoints[rand_r(seed) % (sizeof commit_failpoints /
                                                 sizeof *commit_failpoints)];
    if (start_broker_at(r, next)) {
        r->armed_bk = -1;
        return false;
    }
    note(r,
         "broker %d restarted with %s; broker %d, coordinator of %s "
         "(__transaction_state %" PRId32 "), dies next",
         next + 1, r->armed, leader + 1, tid, part);
    r->cmc_victim = leader;
    r->cmc_part = part;
    r->cmc_since = cn_clock_mono_ms();
    return true;
}

/* crash-mid-commit's second step: kills the coordinator once the armed
 * broker is back in its partition's ISR and every data partition's ISR
 * is full (or gives up after FAILOVER_WAIT_MS; the arming stays).  A
 * broker restarted within its session timeout may never have left the
 * ISR, so the step waits that long first: until then Metadata shows the
 * ISR from before the restart. */
static void cmc_step(struct run *r)
{
    const struct rd_kafka_metadata *md = NULL;
    int64_t since = cn_clock_mono_ms() - r->cmc_since;
    bool ready = false, healthy;

    if (r->cmc_victim < 0 || r->down >= 0)
        return;
    if (since > r->session_ms + FAILOVER_WAIT_MS || r->armed_bk < 0) {
        r->cmc_victim = -1;
        return;
    }
    if (since < r->session_ms + 500 || cluster_state(r, NULL, &healthy) ||
        !healthy)
        return;
    if (!r->meta || rd_kafka_metadata(r->meta, 1, NULL, &md, 5000) || !md)
        return;
    for (int t = 0; t < md->topic_cnt; t++) {
        const struct rd_kafka_metadata_topic *mt = &md->topics[t];
        if (strcmp(mt->topic, "__transaction_state"))
            continue;
        for (int k = 0; k < mt->partition_cnt; k++) {
            const struct rd_kafka_metadata_partition *mp = &mt->partitions[k];
            if (mp->id != r->cmc_part)
                continue;
            for (int j = 0; j < mp->isr_cnt; j++)
                if (mp->isrs[j] == r->bk[r->armed_bk].node_id)
                    ready = mp->leader == r->bk[r->cmc_victim].node_id;
        }
    }
    rd_kafka_metadata_destroy(md);
    if (!ready)
        return;
    kill_broker_now(r, r->cmc_victim);
    r->cmc_victim = -1;
}

/* Ends the disturbance of the one disturbed broker when its time is up;
 * at once when force.  A killed broker comes back once it was down
 * BROKER_DOWN_MS and its input partitions have new leaders (or
 * FAILOVER_WAIT_MS passed), so every kill forces a failover. */
static void cluster_restart(struct run *r, bool force)
{
    int64_t down_for = cn_clock_mono_ms() - r->down_since;
    int32_t leaders[64];
    bool healthy;
    int i = r->down;

    if (i < 0)
        return;
    if (r->down_how == DOWN_PAUSED) {
        if (force || down_for >= r->pause_ms) {
            kill(-r->bk[i].pid, SIGCONT);
            note(r, "broker %d resumed (SIGCONT)", i + 1);
            r->down = -1;
        }
        return;
    }
    if (r->down_how == DOWN_CUT) {
        if (force || down_for >= r->cut_ms) {
            if (cn_vnet_run(CN_VNET_HEAL, r->netns, r->nbk, i, r->netlog))
                fprintf(stderr,
                        "cairnctl verify: could not heal broker "
                        "%d's link\n",
                        i + 1);
            note(r, "broker %d back on the network", i + 1);
            r->down = -1;
        }
        return;
    }
    if (!force && down_for < BROKER_DOWN_MS)
        return;
    if (!force && down_for < FAILOVER_WAIT_MS) {
        if (cluster_state(r, leaders, &healthy))
            return;
        for (int32_t p = 0; p < r->partitions; p++)
            if (leaders[p] < 0 || leaders[p] == r->bk[i].node_id)
                return;
    }
    if (start_broker_at(r, i)) {
        r->down_since = cn_clock_mono_ms(); /* try again later */
        return;
    }
    note(r, "broker %d restarted", i + 1);
    r->down = -1;
}

static bool await_healthy(struct run *r, int64_t wait_ms)
{
    int64_t end = cn_clock_mono_ms() + wait_ms;
    bool healthy = false;

    for (;;) {
        int64_t now = cn_clock_mono_ms();
        if (r->last_ack)
            scan_acks(r, now);
        if (cluster_state(r, NULL, &healthy) == 0 && healthy)
            return true;
        if (now > end || interrupted)
            return false;
        usleep(200000);
    }
}

/* ---- the run ---- */

static struct child *pick_worker(struct run *r, unsigned *seed)
{
    int n = r->writers + r->rpws;
    struct child *c;

    if (n == 0)
        return NULL;
    /* The tailing readers come first and are never fault targets. */
    c = &r->kids[r->ntails + rand_r(seed) % (unsigned)n];
    return c->pid > 0 && !c->paused ? c : NULL;
}

/* Injects one fault of kind; false when it has to wait (cluster mode: a
 * broker is disturbed or an ISR not full yet). */
static bool inject_kind(struct run *r, enum fault kind, unsigned *seed,
                        int64_t *resume_at, struct child **paused)
{
    struct child *c;

    switch (kind) {
    case FAULT_KILL_WORKER:
        c = pick_worker(r, seed);
        if (!c)
            return true;
        kill_child(c, SIGKILL);
        c->inc++;
        spawn(r, c);
        r->injected[FAULT_KILL_WORKER]++;
        break;
    case FAULT_PAUSE_WORKER:
        c = pick_worker(r, seed);
        if (!c || *paused)
            return true;
        kill(c->pid, SIGSTOP);
        c->paused = true;
        *paused = c;
        *resume_at = cn_clock_mono_ms() + r->txn_timeout_ms + 2000;
        r->injected[FAULT_PAUSE_WORKER]++;
        break;
    case FAULT_KILL_BROKER:
        if (r->cluster) {
            if (!cluster_kill(r, seed, false))
                return false;
            r->injected[FAULT_KILL_BROKER]++;
            break;
        }
        stop_broker(r, SIGKILL);
        r->armed_bk = -1;
        if (start_broker(r) == 0)
            r->injected[FAULT_KILL_BROKER]++;
        break;
    case FAULT_CRASH_MID_COMMIT:
        if (r->cluster) {
            if (!cluster_crash_mid_commit(r, seed))
                return false;
            r->injected[FAULT_CRASH_MID_COMMIT]++;
            break;
        }
        stop_broker(r, SIGKILL);
        r->armed_bk = 0;
        r->armed = commit_failpoints[rand_r(seed) %
                                     (sizeof commit_failpoints /
                                      sizeof commit_failpoints[0])];
        if (start_broker(r) == 0)
            r->injected[FAULT_CRASH_MID_COMMIT]++;
        break;
    case FAULT_KILL_LEADER:
        if (!cluster_kill(r, seed, true))
            return false;
        r->injected[FAULT_KILL_LEADER]++;
        break;
    case FAULT_DELAY_PRODUCE:
    case FAULT_DELAY_ENDTXN:
        /* Past the transaction timeout: the coordinator aborts, or the
         * client gives up and retries, before the request arrives. */
        if (cn_vproxy_hold(r->proxy, kind == FAULT_DELAY_PRODUCE ? 0 : 26,
                           r->hold_ms))
            return false;
        note(r, "the next %s request of a writer is held %" PRId64 " ms",
             kind == FAULT_DELAY_PRODUCE ? "Produce" : "EndTxn", r->hold_ms);
        r->injected[kind]++;
        break;
    case FAULT_PAUSE_BROKER:
    case FAULT_PARTITION_BROKER:
        if (!cluster_disturb(r, seed,
                             kind == FAULT_PAUSE_BROKER ? DOWN_PAUSED
                                                        : DOWN_CUT))
            return false;
        r->injected[kind]++;
        break;
    default:
        break;
    }
    return true;
}

/*
 * Injects one fault; false when it has to wait, and the same kind is
 * tried again next time.  The kinds come in rounds, each enabled kind
 * once per round in a seeded order, so a short run sees every kind, even
 * those that often have to wait for a healthy cluster.
 */
static bool inject(struct run *r, unsigned *seed, int64_t *resume_at,
                   struct child **paused)
{
    if (r->nround == 0) {
        for (int k = 0; k < NFAULTS; k++)
            if (r->faults[k])
                r->round[r->nround++] = (enum fault)k;
        if (r->nround == 0)
            return true;
        for (int i = r->nround - 1; i > 0; i--) {
            int j = (int)(rand_r(seed) % (unsigned)(i + 1));
            enum fault t = r->round[i];
            r->round[i] = r->round[j];
            r->round[j] = t;
        }
    }
    if (!inject_kind(r, r->round[r->nround - 1], seed, resume_at, paused))
        return false;
    r->nround--;
    return true;
}

/* True once c's history holds a committed transaction ("C " line). */
static bool child_committed(const struct run *r, const struct child *c)
{
    char path[320], line[256];
    bool found = false;

    hist_path(r, c, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    while (!found && fgets(line, sizeof line, f))
        found = line[0] == 'C' && line[1] == ' ';
    fclose(f);
    return found;
}

/*
 * The fault phase's clock starts once every writer and read-process-write
 * worker has committed a transaction: a slow start (a broker creating
 * the topics, a loaded machine, TLS and SASL handshakes) would otherwise
 * eat a short run and leave nothing to check.  Bounded by the stall
 * bound; past it the run goes on and the report shows what was done.
 */
static void await_first_commits(struct run *r)
{
    int64_t give_up = cn_clock_mono_ms() + r->stall_bound_ms;

    for (;;) {
        bool all = true;
        for (int i = 0; i < r->nkids && all; i++)
            if (strcmp(r->kids[i].role, "tail"))
                all = child_committed(r, &r->kids[i]);
        if (all)
            return;
        if (cn_clock_mono_ms() >= give_up || interrupted) {
            fprintf(stderr, "cairnctl verify: a worker committed no "
                            "transaction within %" PRId64 " ms; going on\n",
                    r->stall_bound_ms);
            return;
        }
        reap(r);
        usleep(50000);
    }
}

/*
 * Restarts (clean) a broker that exited while we thought it up: the one
 * armed by crash-mid-commit dying at its fail point, as intended, to
 * recover what that commit left behind; any other is a broker crash,
 * counted and reported.
 */
static void watch_brokers(struct run *r)
{
    for (int i = 0; i < r->nbk; i++) {
        pid_t pid = r->bk[i].pid;
        int st;

        if (pid <= 0 || (r->down == i && r->down_how == DOWN_PAUSED) ||
            waitpid(pid, &st, WNOHANG) != pid)
            continue;
        kill(-pid, SIGKILL);
        r->bk[i].pid = 0;
        if (r->down == i && r->down_how == DOWN_CUT)
            cn_vnet_run(CN_VNET_HEAL, r->netns, r->nbk, i, r->netlog);
        /* A fail point's crash is a SIGKILL of itself (failpoint.c). */
        if (i == r->armed_bk &&
            ((WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) ||
             (WIFEXITED(st) && WEXITSTATUS(st) == 137))) {
            note(r, "broker %d died at its fail point; restarting it clean",
                 i + 1);
            r->armed_bk = -1;
            r->failpoint_crashes++;
        } else {
            if (i == r->armed_bk)
                r->armed_bk = -1;
            r->unexpected_exits++;
            fprintf(stderr,
                    "cairnctl verify: broker %d exited unexpectedly (%s %d); "
                    "see its log\n",
                    i + 1, WIFSIGNALED(st) ? "signal" : "status",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        }
        if (r->down == i)
            r->down = -1;
        start_broker_at(r, i);
        r->settle_until = cn_clock_mono_ms() + r->session_ms + 500;
    }
}

static void fault_phase(struct run *r)
{
    unsigned seed = r->seed;
    int64_t start = cn_clock_mono_ms(), now;
    int64_t next = start + r->fault_every_ms / 2, resume_at = 0;
    struct child *paused = NULL;

    if (r->cluster) {
        scan_acks(r, start);
        for (int32_t p = 0; p < r->partitions; p++)
            r->last_ack[p] = start;
        r->ack_stall_ms = 0;
    }
    while ((now = cn_clock_mono_ms()) - start < r->duration_ms &&
           !interrupted) {
        if (r->cluster) {
            scan_acks(r, now);
            cluster_restart(r, false);
            cmc_step(r);
        }
        if (paused && now >= resume_at) {
            kill(paused->pid, SIGCONT);
            paused->paused = false;
            paused = NULL;
        }
        watch_brokers(r);
        if (now >= next) {
            if (inject(r, &seed, &resume_at, &paused))
                next = now + r->fault_every_ms / 2 +
                       (int64_t)(rand_r(&seed) % (unsigned)r->fault_every_ms);
            else
                next = now + 250;
        }
        reap(r);
        usleep(50000);
    }
    if (paused) {
        kill(paused->pid, SIGCONT);
        paused->paused = false;
    }
    /* The checks need brokers that stay up. */
    if (r->armed_bk >= 0) {
        int i = r->armed_bk;
        stop_brokers(r, 1u << i, SIGKILL);
        r->armed_bk = -1;
        start_broker_at(r, i);
    }
    r->cmc_victim = -1;
}

/* Feeds every history file to the checker. */
static void load_histories(struct run *r, struct cn_vcheck *vc)
{
    char path[320], *line = NULL, topic[128], value[1024];
    size_t cap = 0;

    for (int i = 0; i < r->nkids; i++) {
        const struct child *c = &r->kids[i];
        bool tail = !strcmp(c->role, "tail");
        FILE *f;

        hist_path(r, c, path, sizeof path);
        f = fopen(path, "r");
        if (!f)
            continue;
        while (getline(&line, &cap, f) > 0) {
            int32_t part;
            int64_t off;
            if (!tail) {
                cn_vcheck_history(vc, line);
            } else if (strchr(line, '\n') &&
                       sscanf(line, "R %127s %" SCNd32 " %" SCNd64 " %1023s",
                              topic, &part, &off, value) == 4) {
                cn_vcheck_read(vc, c->id == 1 ? CN_VC_TAIL_RU : CN_VC_TAIL_RC,
                               topic, part, off, value);
            }
        }
        fclose(f);
    }
    free(line);
}

static void print_report(const struct run *r, const struct cn_vc_report *rep,
                         int64_t ops)
{
    if (r->json) {
        printf("{\"seed\":%u,\"duration_ms\":%" PRId64 ",\"operations\":{"
               "\"writes_acked\":%" PRId64 ",\"txn_committed\":%" PRId64
               ",\"txn_aborted\":%" PRId64 ",\"txn_unknown\":%" PRId64
               ",\"txn_open\":%" PRId64 ",\"reads_rc\":%" PRId64
               ",\"reads_ru\":%" PRId64 ",\"reads_tail\":%" PRId64
               ",\"worker_restarts\":%" PRId64 "},\"faults\":{",
               r->seed, r->duration_ms, rep->writes_acked, rep->txn_committed,
               rep->txn_aborted, rep->txn_unknown, rep->txn_open,
               rep->reads_rc, rep->reads_ru, rep->reads_tail, r->restarts);
        for (int k = 0; k < NFAULTS; k++)
            printf("%s\"%s\":%" PRId64, k ? "," : "", fault_names[k],
                   r->injected[k]);
        printf("},\"failpoint_crashes\":%" PRId64, r->failpoint_crashes);
        printf(",\"unexpected_broker_exits\":%" PRId64, r->unexpected_exits);
        printf(",\"requests_held\":%" PRId64,
               r->proxy ? cn_vproxy_held(r->proxy) : 0);
        printf(",\"brokers\":%d,\"cluster\":%s", r->nbk,
               r->cluster ? "true" : "false");
        printf(",\"ack_stall_ms\":%" PRId64, r->ack_stall_ms);
        printf(",\"stall_ms\":%" PRId64 ",\"anomalies\":{", r->stall_ms);
        for (int k = 0; k < CN_VC_NKINDS; k++) {
            printf("%s\"%s\":{\"count\":%" PRId64 ",\"examples\":[",
                   k ? "," : "", cn_vc_kind_name(k), rep->count[k]);
            for (int j = 0; j < rep->nexamples[k]; j++) {
                if (j)
                    putchar(',');
                cli_json_str(stdout, rep->example[k][j]);
            }
            printf("]}");
        }
        printf("},\"history_dir\":");
        cli_json_str(stdout, r->dir);
        printf(",\"ok\":%s}\n", rep->anomalies ? "false" : "true");
        return;
    }
    printf("operations  %" PRId64 " (writes acked %" PRId64
           ", transactions committed %" PRId64 " aborted %" PRId64
           " unknown %" PRId64 " unfinished %" PRId64 ")\n",
           ops, rep->writes_acked, rep->txn_committed, rep->txn_aborted,
           rep->txn_unknown, rep->txn_open);
    printf("reads       read_committed %" PRId64 ", read_uncommitted %" PRId64
           ", tailing %" PRId64 "\n",
           rep->reads_rc, rep->reads_ru, rep->reads_tail);
    printf("faults     ");
    for (int k = 0; k < NFAULTS; k++)
        printf(" %s %" PRId64 "%s", fault_names[k], r->injected[k],
               k + 1 < NFAULTS ? "," : "");
    printf("; worker restarts %" PRId64 "; broker crashes at a commit fail "
           "point %" PRId64 ", unexpected broker exits %" PRId64 "\n",
           r->restarts, r->failpoint_crashes, r->unexpected_exits);
    printf("stall       %" PRId64 " ms (bound %" PRId64 " ms)\n", r->stall_ms,
           r->stall_bound_ms);
    if (r->cluster)
        printf("cluster     %d brokers; longest a partition took no "
               "acknowledged write: %" PRId64 " ms (%s %" PRId32 ")\n",
               r->nbk, r->ack_stall_ms, r->in, r->ack_stall_part);
    printf("\n%-22s %s\n", "ANOMALY", "COUNT");
    for (int k = 0; k < CN_VC_NKINDS; k++) {
        printf("%-22s %" PRId64 "\n", cn_vc_kind_name(k), rep->count[k]);
        for (int j = 0; j < rep->nexamples[k]; j++)
            printf("    %s\n", rep->example[k][j]);
    }
    printf("\nhistories in %s\n", r->dir);
    printf("result: %s\n", rep->anomalies ? "ANOMALIES FOUND" : "OK");
}

/* After the faults: stop writers, drain rpw, stop everyone, read, check. */
static int finish_run(struct run *r)
{
    struct cn_vcheck *vc = cn_vcheck_new();
    int64_t *last = calloc((size_t)r->partitions, sizeof *last);
    int64_t *ends = calloc((size_t)r->partitions, sizeof *ends);
    int64_t *goff = calloc((size_t)r->partitions, sizeof *goff);
    struct cn_vc_report rep;
    int64_t deadline;
    int rc = EXIT_FAIL;

    if (!vc || !last || !ends || !goff)
        goto out;
    if (r->cluster) {
        /* Every broker back and every ISR full before the writers stop,
         * so what they still hold gets acknowledged; the stall clock runs
         * on meanwhile. */
        cluster_restart(r, true);
        if (!await_healthy(r, r->stall_bound_ms + 30000))
            fprintf(stderr, "cairnctl verify: some partition still has no "
                            "leader or no full ISR; checking anyway\n");
    }
    note(r, "faults over; stopping the writers");
    for (int i = 0; i < r->nkids; i++)
        if (!strcmp(r->kids[i].role, "writer"))
            stop_child(&r->kids[i], 40000);
    wait_stable(r, r->in, NULL);
    note(r, "draining the read-process-write workers");

    /* Drain: the group must commit past every committed input record. */
    if (read_all(r, NULL, true, last))
        goto out;
    deadline = cn_clock_mono_ms() + WAIT_MS;
    for (; r->rpws > 0;) {
        bool done = group_offsets(r, goff) == 0;
        for (int32_t p = 0; done && p < r->partitions; p++)
            done = goff[p] >= last[p];
        if (done || cn_clock_mono_ms() > deadline)
            break;
        reap(r);
        usleep(200000);
    }
    for (int i = 0; i < r->nkids; i++)
        if (!strcmp(r->kids[i].role, "rpw"))
            stop_child(&r->kids[i], 40000);
    wait_stable(r, r->in, r->out);
    note(r, "final reads");
    usleep(1000000); /* let the tailing reader catch up */
    for (int i = 0; i < r->nkids; i++)
        stop_child(&r->kids[i], 10000);

    if (r->rpws > 0)
        cn_vcheck_set_rpw(vc, r->in, r->out);
    load_histories(r, vc);
    if (read_all(r, vc, true, last) || read_all(r, vc, false, NULL))
        goto out;
    if (r->rpws > 0 && group_offsets(r, goff))
        goto out;
    if (r->rpws > 0) {
        rd_kafka_t *rk = client(r, RD_KAFKA_CONSUMER, "verify-probe",
                                "read_committed");
        for (int32_t p = 0; rk && p < r->partitions; p++) {
            int64_t lo;
            if (rd_kafka_query_watermark_offsets(rk, r->in, p, &lo, &ends[p],
                                                 5000))
                ends[p] = last[p];
            cn_vcheck_group_offset(vc, r->in, p, goff[p], last[p], ends[p]);
        }
        if (rk)
            rd_kafka_destroy(rk);
    }
    cn_vcheck_stall(vc, r->stall_ms, r->stall_bound_ms);
    if (r->cluster)
        cn_vcheck_ack_stall(vc, r->in, r->ack_stall_part, r->ack_stall_ms,
                            r->stall_bound_ms);
    if (cn_vcheck_run(vc, &rep))
        goto out;
    print_report(r, &rep,
                 rep.writes_acked + rep.txn_committed + rep.txn_aborted +
                     rep.reads_rc + rep.reads_ru + rep.reads_tail);
    rc = rep.anomalies ? EXIT_FAIL : 0;
out:
    if (rc == EXIT_FAIL && !vc)
        fprintf(stderr, "cairnctl verify: out of memory\n");
    cn_vcheck_free(vc);
    free(last);
    free(ends);
    free(goff);
    return rc;
}

static const char verify_usage[] =
    "Usage: cairnctl [--bootstrap-server HOST:PORT] [--json] verify\n"
    "         --duration S [--faults kill-worker,pause-worker,kill-broker,\n"
    "                                 crash-mid-commit]\n"
    "         [--broker-cmd CMD] [--seed N] [--writers N] [--rpw N]\n"
    "         [--partitions N] [--txn-timeout-ms MS] [--fault-every-ms MS]\n"
    "         [--stall-bound-ms MS] [--dir DIR] [--command-config FILE]\n"
    "--command-config FILE: Kafka client properties (security.protocol,\n"
    "ssl.*, sasl.*) for the librdkafka clients, as for other commands.\n"
    "kill-broker needs --broker-cmd, which starts the broker (via /bin/sh)\n"
    "at the start and after each kill; it listens on --bootstrap-server.\n"
    "crash-mid-commit (Cairn only) restarts it with CAIRN_FAILPOINTS set to\n"
    "one of the coordinator's commit fail points, so it dies at that step of\n"
    "a commit, and brings it back clean to recover.\n"
    "\n"
    "Cluster mode (Cairn's replication, or any Kafka cluster):\n"
    "  cairnctl --bootstrap-server H1:P1,H2:P2,H3:P3 verify --cluster\n"
    "         --broker-cmd CMD1 --broker-cmd CMD2 --broker-cmd CMD3\n"
    "         --duration S [--faults kill-broker,kill-leader,pause-broker,\n"
    "                 partition-broker,crash-mid-commit,delay-produce,\n"
    "                 delay-endtxn,kill-worker,pause-worker]\n"
    "         [--leader-lag-ms MS] [--idempotent]\n"
    "         [--session-timeout-ms MS] [--pause-ms MS] [--partition-ms MS]\n"
    "         [--netns PREFIX] [--proxy LISTEN=TARGET [--hold-ms MS]] ...\n"
    "--broker-cmd once per broker, in the order of --bootstrap-server: the\n"
    "Nth command starts the broker listening on the Nth address.  The topics\n"
    "get every broker as a replica and min.insync.replicas one less.  The\n"
    "writers and read-process-write workers are transactional, as without\n"
    "--cluster (--idempotent: idempotent acks=all writers instead, each\n"
    "record its own transaction); a read_committed and a read_uncommitted\n"
    "reader tail the topics, and what the latter saw must stay in the log.\n"
    "kill-broker kills a random broker with -9, kill-leader the leader of a\n"
    "random input partition after stopping its followers (SIGSTOP) for\n"
    "--leader-lag-ms (default 500) so they lag; one broker is down at a\n"
    "time, it restarts once its partitions have new leaders, and the next\n"
    "kill waits for every ISR to be full.  --stall-bound-ms (default 20000)\n"
    "also bounds how long a partition may take no acknowledged write.\n"
    "pause-broker stops a random broker (SIGSTOP) for --pause-ms, default\n"
    "1.5 x --session-timeout-ms (the brokers' broker.session.timeout.ms;\n"
    "default 9000, Kafka's), so it is fenced and deposed, then SIGCONT.\n"
    "crash-mid-commit restarts the broker that would take over the\n"
    "coordinator of one of the workers' transactional ids with a commit fail\n"
    "point armed, then kills that coordinator (-9): the armed broker dies at\n"
    "that step of the next commit it coordinates and restarts clean.\n"
    "--netns PREFIX (root): each broker runs in network namespace\n"
    "PREFIX-<N> at 10.77.0.<N>, joined by bridge PREFIX-br (10.77.0.254);\n"
    "the Nth --bootstrap-server address must be 10.77.0.<N>.  All of it is\n"
    "deleted at the end, on SIGINT/SIGTERM, and (leftovers of a killed run,\n"
    "with the processes in them) at the start.  partition-broker needs it:\n"
    "a random broker's link goes down for --partition-ms (default 2 x the\n"
    "session timeout), cutting it off from the others and the clients.\n"
    "One broker at most is disturbed (killed, paused, cut off) at a time.\n"
    "--proxy LISTEN=TARGET, once per broker: the writers (only) reach the\n"
    "brokers through a proxy cairnctl runs, listening on LISTEN and\n"
    "forwarding to TARGET, a client listener whose advertised address is\n"
    "LISTEN (inter-broker traffic on another listener).  delay-produce and\n"
    "delay-endtxn need it: the next Produce (EndTxn) request of a writer,\n"
    "and what follows it on its connection, is held --hold-ms (default\n"
    "--txn-timeout-ms + 5000) before it goes on, even if the client gave up\n"
    "on it (KIP-890, KAFKA-17754).\n";

static int verify_usage_error(const char *what, const char *val)
{
    fprintf(stderr, "cairnctl verify: %s%s%s\n%s", what, val ? " " : "",
            val ? val : "", verify_usage);
    return EXIT_USAGE;
}

static bool num(const char *s, int64_t min, int64_t *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min)
        return false;
    *out = v;
    return true;
}

static int parse(struct run *r, int argc, char **argv)
{
    const char *faults = "";
    int64_t v, rpws = -1;

    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t *dst = NULL;
        int64_t min = 1;

        if (!strcmp(k, "verify"))
            continue;
        if (!strcmp(k, "--json")) {
            r->json = true;
            continue;
        }
        if (!strcmp(k, "--cluster")) {
            r->cluster = true;
            continue;
        }
        if (!strcmp(k, "--idempotent")) {
            r->idempotent = true;
            continue;
        }
        if (!strcmp(k, "--help")) {
            fputs(verify_usage, stdout);
            return -1;
        }
        if (!val)
            return verify_usage_error("missing value for", k);
        i++;
        if (!strcmp(k, "--bootstrap-server")) {
            r->bootstrap = val;
        } else if (!strcmp(k, "--faults")) {
            faults = val;
        } else if (!strcmp(k, "--command-config")) {
            rd_kafka_conf_t *c = rd_kafka_conf_new();
            int bad = cli_verify_apply_sec(c, val);
            rd_kafka_conf_destroy(c);
            if (bad)
                return EXIT_USAGE;
            r->command_config = val;
        } else if (!strcmp(k, "--broker-cmd")) {
            if (r->nbk == MAX_BROKERS)
                return verify_usage_error("too many", k);
            r->broker_cmd = val;
            r->bk[r->nbk].node_id = -1;
            r->bk[r->nbk++].cmd = val;
        } else if (!strcmp(k, "--proxy")) {
            const char *eq = strchr(val, '=');
            if (!eq || eq == val || !eq[1] || r->nproxy == CN_VPROXY_MAX ||
                (size_t)(eq - val) >= 64)
                return verify_usage_error("--proxy wants LISTEN=TARGET, not",
                                          val);
            snprintf(r->writer_bootstrap + strlen(r->writer_bootstrap),
                     sizeof r->writer_bootstrap - strlen(r->writer_bootstrap),
                     "%s%.*s", r->nproxy ? "," : "", (int)(eq - val), val);
            r->proxy_listen[r->nproxy] = val;
            r->proxy_target[r->nproxy++] = eq + 1;
        } else if (!strcmp(k, "--netns")) {
            if (!cn_vnet_prefix_ok(val))
                return verify_usage_error("--netns wants 1-8 of [a-z0-9], not",
                                          val);
            r->netns = val;
        } else if (!strcmp(k, "--dir")) {
            snprintf(r->dir, sizeof r->dir, "%s", val);
        } else if (!strcmp(k, "--timeout")) {
            continue;
        } else {
            if (!num(val, 0, &v))
                return verify_usage_error("bad number", val);
            if (!strcmp(k, "--duration"))
                r->duration_ms = v * 1000;
            else if (!strcmp(k, "--seed"))
                r->seed = (unsigned)v;
            else if (!strcmp(k, "--writers") && v <= 8)
                r->writers = (int)v;
            else if (!strcmp(k, "--rpw") && v <= 8)
                dst = &rpws;
            else if (!strcmp(k, "--leader-lag-ms") && v <= 10000)
                r->lag_ms = v;
            else if (!strcmp(k, "--session-timeout-ms") && v >= 100)
                r->session_ms = v;
            else if (!strcmp(k, "--pause-ms") && v >= 1)
                r->pause_ms = v;
            else if (!strcmp(k, "--partition-ms") && v >= 1)
                r->cut_ms = v;
            else if (!strcmp(k, "--hold-ms") && v >= 1)
                r->hold_ms = v;
            else if (!strcmp(k, "--partitions") && v >= 1 && v <= 64)
                r->partitions = (int)v;
            else if (!strcmp(k, "--txn-timeout-ms") && v >= 1000)
                r->txn_timeout_ms = (int)v;
            else if (!strcmp(k, "--fault-every-ms") && v >= min)
                r->fault_every_ms = v;
            else if (!strcmp(k, "--stall-bound-ms"))
                dst = &r->stall_bound_ms;
            else
                return verify_usage_error("bad option or value", k);
            if (dst)
                *dst = v;
        }
    }
    if (rpws >= 0)
        r->rpws = (int)rpws;
    for (const char *p = faults; *p;) {
        size_t len = strcspn(p, ",");
        bool found = false;
        for (int k = 0; k < NFAULTS; k++) {
            if (strlen(fault_names[k]) == len &&
                !strncmp(p, fault_names[k], len)) {
                r->faults[k] = true;
                found = true;
            }
        }
        if (!found && len)
            return verify_usage_error("unknown fault in", faults);
        p += len + (p[len] == ',');
    }
    if (r->duration_ms <= 0)
        return verify_usage_error("needs --duration S", NULL);
    if ((r->faults[FAULT_KILL_BROKER] || r->faults[FAULT_CRASH_MID_COMMIT]) &&
        !r->broker_cmd)
        return verify_usage_error(
            "kill-broker and crash-mid-commit need --broker-cmd", NULL);
    if (!r->cluster) {
        if (r->nbk > 1)
            return verify_usage_error(
                "--broker-cmd more than once needs --cluster", NULL);
        if (r->faults[FAULT_KILL_LEADER] || r->faults[FAULT_PAUSE_BROKER] ||
            r->faults[FAULT_PARTITION_BROKER] || r->netns || r->nproxy ||
            r->faults[FAULT_DELAY_PRODUCE] || r->faults[FAULT_DELAY_ENDTXN])
            return verify_usage_error("kill-leader, pause-broker, "
                                      "partition-broker and --netns need "
                                      "--cluster",
                                      NULL);
        if (r->nbk == 1)
            snprintf(r->bk[0].addr, sizeof r->bk[0].addr, "%s", r->bootstrap);
        return 0;
    }
    /* Cluster mode: the Nth --broker-cmd listens on the Nth address. */
    if (r->faults[FAULT_PARTITION_BROKER] && !r->netns)
        return verify_usage_error("partition-broker needs --netns", NULL);
    if ((r->faults[FAULT_DELAY_PRODUCE] || r->faults[FAULT_DELAY_ENDTXN]) &&
        !r->nproxy)
        return verify_usage_error("delay-produce and delay-endtxn need "
                                  "--proxy",
                                  NULL);
    if (r->nproxy && r->nproxy != r->nbk)
        return verify_usage_error("--proxy once per --broker-cmd", NULL);
    {
        const char *p = r->bootstrap;
        int n = 0;
        while (*p) {
            size_t len = strcspn(p, ",");
            if (n < MAX_BROKERS && len < sizeof r->bk[0].addr)
                snprintf(r->bk[n].addr, sizeof r->bk[n].addr, "%.*s", (int)len,
                         p);
            n++;
            p += len + (p[len] == ',');
        }
        if (r->nbk < 2 || n != r->nbk)
            return verify_usage_error(
                "--cluster needs one --broker-cmd per --bootstrap-server "
                "address, two or more",
                NULL);
    }
    return 0;
}

int cmd_verify(int argc, char **argv)
{
    struct run *r = calloc(1, sizeof *r);
    int64_t t0 = cn_clock_wall_ms();
    int rc;

    if (!r)
        return EXIT_FAIL;
    r->t0 = cn_clock_mono_ms();
    r->bootstrap = "127.0.0.1:9092";
    r->seed = (unsigned)(t0 ^ getpid());
    r->writers = 2;
    r->rpws = 2;
    r->partitions = 3;
    r->txn_timeout_ms = 10000;
    r->fault_every_ms = 5000;
    r->lag_ms = 500;
    r->session_ms = 9000; /* Kafka's broker.session.timeout.ms */
    r->down = -1;
    r->armed_bk = -1;
    r->cmc_victim = -1;
    rc = parse(r, argc, argv);
    if (rc) {
        free(r);
        return rc < 0 ? 0 : rc;
    }
    if (!r->pause_ms)
        r->pause_ms = r->session_ms * 3 / 2;
    if (!r->cut_ms)
        r->cut_ms = r->session_ms * 2;
    if (!r->hold_ms)
        r->hold_ms = r->txn_timeout_ms + 5000;
    if (!r->stall_bound_ms)
        r->stall_bound_ms = r->cluster
                                ? 20000
                                : 2 * (int64_t)r->txn_timeout_ms + 10000;
    if (!r->dir[0]) {
        snprintf(r->dir, sizeof r->dir, "/tmp/cairn-verify-XXXXXX");
        if (!mkdtemp(r->dir)) {
            perror("cairnctl verify: mkdtemp");
            free(r);
            return EXIT_FAIL;
        }
    } else if (mkdir(r->dir, 0755) && errno != EEXIST) {
        perror("cairnctl verify: mkdir");
        free(r);
        return EXIT_FAIL;
    }
    snprintf(r->in, sizeof r->in, "verify-%u-in", r->seed);
    snprintf(r->out, sizeof r->out, "verify-%u-out", r->seed);
    snprintf(r->group, sizeof r->group, "verify-%u-rpw", r->seed);
    fprintf(stderr, "cairnctl verify: seed %u, histories in %s\n", r->seed,
            r->dir);
    signal(SIGPIPE, SIG_IGN);
    {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal; /* no SA_RESTART: waits end early */
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
    }

    rc = EXIT_FAIL;
    if (r->netns) {
        snprintf(r->netlog, sizeof r->netlog, "%s/netns.log", r->dir);
        /* What a run of the same prefix killed before its end left. */
        cn_vnet_run(CN_VNET_TEARDOWN, r->netns, r->nbk, 0, r->netlog);
        if (cn_vnet_run(CN_VNET_SETUP, r->netns, r->nbk, 0, r->netlog)) {
            fprintf(stderr,
                    "cairnctl verify: --netns: could not set up the "
                    "namespaces (root needed); see %s\n",
                    r->netlog);
            goto out;
        }
    }
    for (int i = 0; i < r->nbk; i++)
        if (start_broker_at(r, i))
            goto out;
    if (r->cluster) {
        r->last_ack = calloc((size_t)r->partitions, sizeof *r->last_ack);
        r->meta = client(r, RD_KAFKA_PRODUCER, NULL, NULL);
        if (!r->last_ack || !r->meta)
            goto out;
    }
    if (r->nproxy) {
        /* Each --proxy's listen address is the text before its '='. */
        char listen[CN_VPROXY_MAX][64], err[256];
        const char *lp[CN_VPROXY_MAX];
        for (int i = 0; i < r->nproxy; i++) {
            snprintf(listen[i], sizeof listen[i], "%.*s",
                     (int)(r->proxy_target[i] - 1 - r->proxy_listen[i]),
                     r->proxy_listen[i]);
            lp[i] = listen[i];
        }
        r->proxy = cn_vproxy_start(r->nproxy, lp, r->proxy_target, err,
                                   sizeof err);
        if (!r->proxy) {
            fprintf(stderr, "cairnctl verify: --proxy: %s\n", err);
            goto out;
        }
    }
    if (create_topics(r))
        goto out;
    if (r->cluster && !await_healthy(r, WAIT_MS)) {
        fprintf(stderr,
                "cairnctl verify: the topics have no full ISR "
                "after %d s\n",
                WAIT_MS / 1000);
        goto out;
    }
    r->ntails = r->cluster ? 2 : 1;
    for (int i = 0; i < r->ntails; i++)
        r->kids[r->nkids++] = (struct child){.role = "tail", .id = i};
    for (int i = 0; i < r->writers; i++)
        r->kids[r->nkids++] = (struct child){.role = "writer", .id = i};
    for (int i = 0; i < r->rpws; i++)
        r->kids[r->nkids++] = (struct child){.role = "rpw", .id = i};
    for (int i = 0; i < r->nkids; i++)
        if (spawn(r, &r->kids[i]))
            goto out;
    await_first_commits(r);
    fault_phase(r);
    if (!interrupted)
        rc = finish_run(r);
out:
    for (int i = 0; i < r->nkids; i++)
        kill_child(&r->kids[i], SIGKILL);
    if (r->meta)
        rd_kafka_destroy(r->meta);
    stop_brokers(r, ~0u, SIGTERM);
    cn_vproxy_stop(r->proxy);
    if (r->netns)
        cn_vnet_run(CN_VNET_TEARDOWN, r->netns, r->nbk, 0, r->netlog);
    if (interrupted)
        fprintf(stderr, "cairnctl verify: interrupted\n");
    free(r->last_ack);
    free(r);
    return rc;
}
