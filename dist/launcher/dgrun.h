/* dist/launcher/dgrun.h — what the launcher's files share: limits, the supervisor's and the
 * options' structs, and the functions each file offers the others. The launcher is plain POSIX
 * + libc and does not link the library (dgrun.c says what it does). */
#ifndef DG_DGRUN_H
#define DG_DGRUN_H

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_LOCAL 1024         /* workers on one node: far above any GPU count or sane CPU split */
#define MAX_NODES 4096
#define STOP_GRACE_MS 2000     /* SIGTERM → SIGKILL: time to flush and close, short enough that Ctrl-C feels prompt */
#define FOLLOW_MS 50           /* how often the followed log is looked at for new output */
#define FINISH_STALL_MS 1000   /* at the end, a terminal that takes nothing this long is given up */
#define FINISH_MAX_MS 10000    /* ... and one that is merely slow, after this long */
#define SIGNAL_FINISH_MS 300   /* after Ctrl-C, the terminal gets only this */
#define SHIM_FLAG "--worker-shim"
#define TOKEN_ENV "DG_JOB_TOKEN"
#define TOKEN_MAX 128          /* the library's DG_STORE_MAX_TOKEN */
#define TOKEN_BYTES 16         /* 128 random bits, 32 hex digits */

typedef struct {
    pid_t pid;        /* also the process group id: setpgid(pid, pid) at fork */
    char *label;      /* "worker 1 (rank 1, pid 1234)", for messages */
    char *log_path;   /* where to look, named in the failure message; NULL for mpirun */
    bool reaped;
    int status;
} child;
/* the first local worker's log, shown on dgrun's stdout as it grows (output.c) */
typedef struct {
    int fd;                  /* the log, read-only; -1 when not followed */
    const char *path;
    int rank;
    off_t pos;               /* bytes of the log shown or skipped */
    unsigned long long gap;  /* skipped since the last notice */
    unsigned long long dropped; /* skipped in all */
    bool skip_line;          /* after a skip: resume at the next line start */
    size_t skipped_in_line;
    char last;               /* the last byte shown */
    bool done;               /* stdout is gone: nothing more to show */
} follower;
/* a pipe of mpirun's (stdout or stderr) copied to the same stream of dgrun's */
typedef struct {
    int fd;                  /* read end, non-blocking; -1 when closed */
    int to;                  /* 0 = stdout, 1 = stderr */
    const char *what;
} relay;
typedef struct {
    child *kids;
    int nkids;
    follower *follow;        /* NULL = none */
    relay relays[2];         /* fd -1 = none */
    const char *fail_suffix; /* appended to the failure line: "; stopping the other workers" */
    pid_t watch_ppid;        /* shim: stop everything when reparented (mpirun died), 0 = off */
    bool announce_signals;   /* the launcher says why it stops; a shim told to stop by mpirun does not */
    bool stopping, killed;
    long long deadline;
    int stop_signal;         /* the signal that stopped the supervisor itself, 0 = none */
    int failed;              /* index of the first failed child, -1 = none */
    bool has_children;       /* any process left below us: with a subreaper, "no descendants" */
    /* parameter-server mode (ps.c): kids[0, ps_servers) are servers, the rest workers */
    int ps_servers;
    long long ps_grace_ms;         /* a server still running this long after the last worker ended is stopped; -1 = never */
    long long ps_grace_deadline;   /* 0 = not all workers are done yet */
    bool ps_servers_terminated;    /* ... which happened: their statuses do not count */
} supervisor;
typedef struct {
    const char *name;
    char value[64];
    const char *long_value; /* for values that do not fit (the endpoint list) */
} env_var;
typedef struct {
    const char *gpus_text;   /* as given, for the configuration block; NULL = absent */
    int *gpus;
    int ngpus;
    long nproc;              /* 0 = absent */
    const char *ips_text;
    char **ips;
    int nips;
    const char *node_ip;
    int node_index;
    long started_port;       /* 0 = absent */
    const char *log_dir;
    const char *mpirun;
    char **prog;             /* program and its args, NULL-terminated (it is argv's tail) */
    int nprog;
    /* parameter-server mode (ps.c): any of --server_num, --worker_num, --servers, --workers */
    bool ps;
    long server_num, worker_num;          /* 0 = absent */
    const char *servers_text, *workers_text;
    long server_grace_s;
    const char *collective_flag;          /* the first collective-only flag given (a usage error in PS mode) */
} options;
/* a parameter-server job: every server's endpoint, every worker's address, which run here */
typedef struct {
    int nservers, nworkers;
    char **server_ip, **worker_ip;
    int *server_port;
    char *list;              /* PADDLE_PSERVERS_IP_PORT_LIST */
    char *ips;               /* PADDLE_PSERVER_IPS, when every server has one port (shared_port) */
    int shared_port;         /* 0 = the ports differ */
    bool *server_here, *worker_here;
    char token[TOKEN_MAX + 1];
} ps_layout;
typedef struct {
    int nlocal, world, first_rank;
    int *ports;          /* per local index */
    char **endpoint;     /* per rank */
    char *endpoints;     /* comma-joined, rank order */
    char token[TOKEN_MAX + 1];  /* the job's identity, DG_JOB_TOKEN of every worker */
} layout;

extern int sig_pipe[2];
extern const char *usage_text;

/* util.c: errors, parsing, logs, signals */
void die(int code, const char *fmt, ...);
void usage_error(const char *fmt, ...);
void *xmalloc(size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...);
long parse_int(const char *s, long lo, long hi);
char **split_commas(const char *list, int *count, int max);
const char *signal_name(int sig);
long long now_ms(void);
bool write_all(int fd, const char *p, size_t n);
void mkdir_p(const char *dir);
int open_log(const char *log_dir, int rank, char **path_out);
void make_job_token(char *out, size_t len);
void on_signal(int sig);
void install_signals(void);
void child_reset_signals(const sigset_t *old_mask);
/* supervise.c: children and their supervisor */
void send_signal(pid_t target, int sig);
void signal_children(int sig);
void signal_all(supervisor *S, int sig);
void begin_stop(supervisor *S);
void report_failure(supervisor *S, int i);
bool status_ok(int status);
void reap(supervisor *S);
void handle_signals(supervisor *S);
bool leaders_alive(const supervisor *S);
int supervise(supervisor *S);
pid_t spawn(char *const argv[], const env_var *env, int nenv, const char *unset, int out_fd, int err_fd, int pdeath_sig);
/* output.c: the terminal, best-effort */
void term_open(void);
void term_put(int which, const char *p, size_t n);
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void term_flush(void);
int term_pollfds(struct pollfd *fds);
bool term_pending(void);
void follow_open(follower *f, const char *path, int rank);
bool follow_pump(follower *f);
void term_finish(follower *f, int stall_ms, int total_ms);
bool relay_pump(relay *r);
/* options.c: command line, layout, what Paddle prints */
const char *option_value(int argc, char **argv, int *i, const char *name);
void parse_gpus(options *o, const char *text);
void parse_ips(options *o, const char *text);
void parse_options(options *o, int argc, char **argv);
bool is_local_address(const char *ip, struct ifaddrs *ifs);
void choose_node(options *o);
void pick_free_ports(int n, int *ports);
void make_layout(const options *o, layout *L);
void choose_job_token(const options *o, layout *L);
void free_layout(layout *L);
void free_options(options *o);
int worker_env(const options *o, const layout *L, int i, env_var *env);
void write_endpoints_log(const char *log_dir, const layout *L);
void print_py_list(char **items, int n);
void print_configuration(const options *o);
void print_env_row(const char *key, const char *value);
void print_log_prefix(void);
void print_envs(const options *o, const layout *L);
/* dgrun.c: the two modes and the shim */
int run_gpu_mode(const options *o, const layout *L);
bool find_in_path(const char *prog);
char *self_path(void);
void check_cpu_mode(const options *o);
int run_cpu_mode(const options *o, const layout *L);
int env_index(const char *name, long max);
int run_shim(int argc, char **argv);
/* ps.c: parameter-server mode */
void check_ps_options(const options *o);
void make_ps_layout(const options *o, ps_layout *P);
void print_ps_tables(const options *o, const ps_layout *P);
int run_ps_mode(const options *o, const ps_layout *P);
void free_ps_layout(ps_layout *P);

#endif
