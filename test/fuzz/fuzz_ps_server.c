/* test/fuzz/fuzz_ps_server.c — libFuzzer target for the parameter server's request handler
 * (dist/ps/server.c), the one place a byte from the network reaches a table. A server is
 * stateful, so one input is a whole conversation with a fresh server: the first byte picks the
 * job's worker count (1..3), then messages follow, each as a u16 little-endian length and that
 * many bytes (a short last one is sent as it is). Every request must get a reply whose header is
 * a parameter-server reply, an ERROR reply must carry its reason, and nothing may crash, leak or
 * read out of bounds. SAVE requests are answered as any other but with their directory replaced by
 * a scratch one, so the fuzzer never writes where a message says. Build and run:
 * make fuzz-ps-server FUZZ_SECONDS=600. test/test_fuzz_corpus.c includes this file to replay the
 * corpus (test/fuzz/corpus/ps_server, seeds from test/fuzz/ps_seeds.py). */
#include "../../dist/ps/proto.h"
#include "../../dist/ps/server.h"
#include <assert.h>
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

/* A SAVE's directory, whatever the message named: under the system's temporary folder. */
static void fuzz_ps_save_dir(char *out, size_t cap) {
    const char *tmp = getenv("TMPDIR");
    snprintf(out, cap, "%s/dg_fuzz_ps_save", tmp && *tmp ? tmp : "/tmp");
}

static void fuzz_ps_send(dg_ps_server *s, const unsigned char *m, size_t n) {
    unsigned char *copy = NULL;
    if (n >= DG_PS_REQ_HEADER + 8 && dg_ps_get16(m + 6) == DG_PS_OP_SAVE) {
        char dir[512];
        fuzz_ps_save_dir(dir, sizeof dir);
        size_t dn = strlen(dir);
        copy = malloc(DG_PS_REQ_HEADER + 8 + dn);
        if (!copy) return;
        memcpy(copy, m, DG_PS_REQ_HEADER + 8);
        memcpy(copy + DG_PS_REQ_HEADER + 8, dir, dn);
        m = copy;
        n = DG_PS_REQ_HEADER + 8 + dn;
    }
    void *r = NULL;
    size_t rl = 0;
    int rc = dg_ps_server_handle(s, m, n, &r, &rl);
    if (rc == 0) {
        const unsigned char *b = r;
        assert(r && rl >= DG_PS_REPLY_HEADER && dg_ps_get32(b) == DG_PS_MAGIC && dg_ps_get16(b + 4) == DG_PS_VERSION);
        uint16_t status = dg_ps_get16(b + 6);
        assert(status == DG_PS_OK || status == DG_PS_NOT_YET || status == DG_PS_ERROR);
        assert(status != DG_PS_ERROR || rl > DG_PS_REPLY_HEADER);   /* a refusal says why */
    }
    free(r);
    free(copy);
    dg_clear_error();
}

int FUZZ_ENTRY(const unsigned char *data, size_t size);
int FUZZ_ENTRY(const unsigned char *data, size_t size) {
    if (size < 1) return 0;
    dg_ps_server *s = dg_ps_server_new(1 + data[0] % 3);
    assert(s);
    size_t at = 1;
    while (at < size) {
        size_t n = at + 2 <= size ? (size_t)data[at] | (size_t)data[at + 1] << 8 : size - at;
        at += at + 2 <= size ? 2 : 0;
        if (n > size - at) n = size - at;
        fuzz_ps_send(s, data + at, n);
        at += n;
        if (dg_ps_server_done(s)) break;   /* every worker stopped: the server's loop would end here */
    }
    dg_ps_server_free(s);
    dg_clear_error();
    return 0;
}
