/* dist/ps/env.c — reads a parameter-server job's role environment (env.h) from either naming
 * scheme: the tutorial's (PADDLE_TRAINING_ROLE, PADDLE_PSERVER_IPS + PADDLE_PSERVER_PORT,
 * PADDLE_TRAINERS, PADDLE_TRAINER_ID, PADDLE_CURRENT_IP) and Paddle's launcher's (TRAINING_ROLE,
 * PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM, POD_IP, PADDLE_PORT). dgrun sets both. When
 * both names of a setting are present they must agree: a job half-configured by two tools would
 * otherwise have processes disagreeing about who the servers are, and hang instead of failing.
 * Every error names the variable and its value. */
#include "../dist_internal.h"
#include "env.h"
#include <ctype.h>

/* A decimal integer in [lo, hi], or false. */
static bool parse_int_in(const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return false;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p) || v > 100000000) return false;
        v = v * 10 + (*p - '0');
    }
    if (v < lo || v > hi) return false;
    *out = v;
    return true;
}

static const char *env_get(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;   /* an empty variable is an unset one: `export X=` clears it in a script */
}

/* The one value of a setting with two names: either, or both when equal. */
static int pick(const char *a_name, const char *b_name, const char **out) {
    const char *a = env_get(a_name), *b = env_get(b_name);
    DG_CHECK_INT(!a || !b || !strcmp(a, b), "%s='%s' and %s='%s' disagree (set one, or both to the same value)",
                 a_name, a, b_name, b);
    *out = a ? a : b;
    return 0;
}

/* An address: letters, digits, '.', '-', '_' (IPv4 or a host name), not empty. */
static bool valid_ip(const char *s, size_t n) {
    if (n == 0 || n >= DG_PS_ENDPOINT_MAX - 7) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '-' && s[i] != '_') return false;
    return true;
}

/* "ip:port" checked and copied into out; var names where it came from. */
static int check_endpoint(const char *var, const char *list, const char *ep, size_t n, char *out) {
    const char *colon = memchr(ep, ':', n);
    char port_text[16] = "";
    long port = 0;
    size_t plen = colon ? n - (size_t)(colon + 1 - ep) : 0;
    if (colon && plen < sizeof port_text) memcpy(port_text, colon + 1, plen);
    DG_CHECK_INT(colon && valid_ip(ep, (size_t)(colon - ep)) && plen < sizeof port_text &&
                 parse_int_in(port_text, 1, 65535, &port),
                 "%s='%s': '%.*s' is not ip:port with a port from 1 to 65535", var, list, (int)n, ep);
    memcpy(out, ep, n);
    out[n] = 0;
    return 0;
}

/* Splits a comma list into endpoints (port given: items are ips, each gets ":port"). */
static int split_servers(const char *var, const char *list, const char *port, dg_ps_env *e, int *n_out,
                         char (**out)[DG_PS_ENDPOINT_MAX]) {
    int n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    DG_CHECK_INT(n <= DG_PS_MAX_SERVERS, "%s lists %d servers; at most %d", var, n, DG_PS_MAX_SERVERS);
    char (*eps)[DG_PS_ENDPOINT_MAX] = calloc((size_t)n, sizeof *eps);
    if (!eps) { DG_RAISE(DG_ENOMEM, "out of memory for %d server endpoints", n); return DG_ENOMEM; }
    const char *p = list;
    for (int i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        int rc = 0;
        if (port) {
            if (!valid_ip(p, len)) {
                DG_RAISE(DG_EINVAL, "%s='%s': '%.*s' is not an address", var, list, (int)len, p);
                rc = DG_EINVAL;
            } else {
                snprintf(eps[i], DG_PS_ENDPOINT_MAX, "%.*s:%s", (int)len, p, port);
            }
        } else {
            rc = len < DG_PS_ENDPOINT_MAX ? check_endpoint(var, list, p, len, eps[i])
                                          : (DG_RAISE(DG_EINVAL, "%s: endpoint %d is too long", var, i), DG_EINVAL);
        }
        for (int j = 0; !rc && j < i; j++)
            if (!strcmp(eps[i], eps[j])) {
                DG_RAISE(DG_EINVAL, "%s='%s' lists %s twice (servers %d and %d)", var, list, eps[i], j, i);
                rc = DG_EINVAL;
            }
        if (rc) { free(eps); return rc; }
        p += len + (p[len] == ',');
    }
    (void)e;
    *n_out = n;
    *out = eps;
    return 0;
}

static int read_servers(dg_ps_env *e) {
    const char *list = env_get("PADDLE_PSERVERS_IP_PORT_LIST"), *ips = env_get("PADDLE_PSERVER_IPS"),
               *port = env_get("PADDLE_PSERVER_PORT");
    long pt;
    DG_CHECK_INT(list || ips, "the server list is missing: set PADDLE_PSERVERS_IP_PORT_LIST (ip:port,...) or "
                 "PADDLE_PSERVER_IPS (ip,...) with PADDLE_PSERVER_PORT");
    DG_CHECK_INT(!port || parse_int_in(port, 1, 65535, &pt), "PADDLE_PSERVER_PORT='%s' is not a port from 1 to 65535", port);
    int rc;
    if (list) {
        rc = split_servers("PADDLE_PSERVERS_IP_PORT_LIST", list, NULL, e, &e->n_servers, &e->servers);
        if (rc) return rc;
    }
    if (ips) {
        DG_CHECK_INT(port, "PADDLE_PSERVER_IPS='%s' is set without PADDLE_PSERVER_PORT (the servers' port)", ips);
        int n;
        char (*eps)[DG_PS_ENDPOINT_MAX];
        rc = split_servers("PADDLE_PSERVER_IPS", ips, port, e, &n, &eps);
        if (rc) return rc;
        if (!list) {
            e->n_servers = n;
            e->servers = eps;
            return 0;
        }
        bool same = n == e->n_servers;
        for (int i = 0; same && i < n; i++) same = !strcmp(eps[i], e->servers[i]);
        free(eps);
        DG_CHECK_INT(same, "PADDLE_PSERVERS_IP_PORT_LIST='%s' and PADDLE_PSERVER_IPS='%s' with PADDLE_PSERVER_PORT=%s "
                     "name different servers", list, ips, port);
    }
    return 0;
}

void dg_ps_env_clear(dg_ps_env *e) {
    if (!e) return;
    free(e->servers);
    memset(e, 0, sizeof *e);
    e->worker_id = e->server_index = -1;
}

static int read_env(dg_ps_env *e) {
    const char *role;
    int rc = pick("TRAINING_ROLE", "PADDLE_TRAINING_ROLE", &role);
    if (rc) return rc;
    DG_CHECK_INT(role, "the role is missing: set TRAINING_ROLE or PADDLE_TRAINING_ROLE to PSERVER or TRAINER");
    if (!strcmp(role, "PSERVER")) e->role = DG_PS_SERVER;
    else if (!strcmp(role, "TRAINER")) e->role = DG_PS_WORKER;
    else {
        const char *name = env_get("TRAINING_ROLE") ? "TRAINING_ROLE" : "PADDLE_TRAINING_ROLE";
        DG_RAISE(DG_EINVAL, "%s='%s' is not a role: PSERVER or TRAINER", name, role);
        return DG_EINVAL;
    }
    if ((rc = read_servers(e))) return rc;

    const char *num;
    long v;
    if ((rc = pick("PADDLE_TRAINERS_NUM", "PADDLE_TRAINERS", &num))) return rc;
    DG_CHECK_INT(num, "the number of workers is missing: set PADDLE_TRAINERS_NUM or PADDLE_TRAINERS");
    DG_CHECK_INT(parse_int_in(num, 1, 1 << 20, &v), "%s='%s' is not a number of workers (a positive integer)",
                 env_get("PADDLE_TRAINERS_NUM") ? "PADDLE_TRAINERS_NUM" : "PADDLE_TRAINERS", num);
    e->n_workers = (int)v;

    const char *ip;
    if ((rc = pick("PADDLE_CURRENT_IP", "POD_IP", &ip))) return rc;
    if (ip) {
        const char *name = env_get("PADDLE_CURRENT_IP") ? "PADDLE_CURRENT_IP" : "POD_IP";
        DG_CHECK_INT(valid_ip(ip, strlen(ip)), "%s='%s' is not an address", name, ip);
        snprintf(e->current_ip, sizeof e->current_ip, "%s", ip);
    }

    if (e->role == DG_PS_WORKER) {
        const char *id = env_get("PADDLE_TRAINER_ID");
        DG_CHECK_INT(id, "PADDLE_TRAINER_ID is missing: a worker needs its index in [0, %d)", e->n_workers);
        DG_CHECK_INT(parse_int_in(id, 0, e->n_workers - 1, &v), "PADDLE_TRAINER_ID='%s' is not a worker index in [0, %d) "
                     "(%d workers)", id, e->n_workers, e->n_workers);
        e->worker_id = (int)v;
        return 0;
    }

    /* a server: its own endpoint, which must be one of the list's */
    DG_CHECK_INT(ip, "a server needs its address: set PADDLE_CURRENT_IP or POD_IP");
    const char *port;
    if ((rc = pick("PADDLE_PORT", "PADDLE_PSERVER_PORT", &port))) return rc;
    DG_CHECK_INT(port, "a server needs its port: set PADDLE_PORT or PADDLE_PSERVER_PORT");
    DG_CHECK_INT(parse_int_in(port, 1, 65535, &v), "%s='%s' is not a port from 1 to 65535",
                 env_get("PADDLE_PORT") ? "PADDLE_PORT" : "PADDLE_PSERVER_PORT", port);
    snprintf(e->current, sizeof e->current, "%s:%ld", ip, v);
    for (int i = 0; i < e->n_servers; i++)
        if (!strcmp(e->servers[i], e->current)) { e->server_index = i; return 0; }
    DG_RAISE(DG_EINVAL, "this server's endpoint %s (%s='%s', %s='%s') is not in the server list %s",
             e->current, env_get("PADDLE_CURRENT_IP") ? "PADDLE_CURRENT_IP" : "POD_IP", ip,
             env_get("PADDLE_PORT") ? "PADDLE_PORT" : "PADDLE_PSERVER_PORT", port,
             env_get("PADDLE_PSERVERS_IP_PORT_LIST") ? "PADDLE_PSERVERS_IP_PORT_LIST" : "PADDLE_PSERVER_IPS");
    return DG_EINVAL;
}

int dg_ps_env_read(dg_ps_env *e) {
    DG_CHECK_INT(e, "ps_env_read: e is NULL");
    memset(e, 0, sizeof *e);
    e->worker_id = e->server_index = -1;
    int rc = read_env(e);
    if (rc) dg_ps_env_clear(e);   /* nothing half-read is left for the caller to free */
    return rc;
}
