/* dist/mpi/hier_mpi.c — the MPI transport's hierarchical all-reduce (Paddle's
 * use_hierarchical_allreduce): reduce inside each node to its first rank, all-reduce among those
 * leaders (one rank per node), broadcast inside each node. Between nodes only the leaders send,
 * so a job whose nodes talk over a slower network moves 1 / ranks-per-node of the flat
 * all-reduce's traffic there. Nodes are MPI's shared-memory domains (MPI_COMM_TYPE_SHARED), or
 * with ranks_per_node (hierarchical_allreduce_inter_nranks) consecutive blocks of ranks, which
 * is how one machine plays several nodes.
 *
 * The stages form one non-blocking operation (Ireduce -> Iallreduce -> Ibcast, each over the
 * buffer's 8 MB pieces), advanced by polling, so the DataParallel overlap can keep several
 * buckets in flight; the blocking all-reduce polls it to the end. */
#include "mpi_internal.h"

static void set_returns(MPI_Comm comm) {
    if (comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
}

int dg_mpi_hier_make(dg_comm *c, mpi_channel *ch, bool first) {
    int rank = c->rank, err, lr = 0, ls = 0;
    MPI_Comm node = MPI_COMM_NULL;
    if (c->ranks_per_node > 0) err = MPI_Comm_split(ch->comm, rank / c->ranks_per_node, rank, &node);
    else err = MPI_Comm_split_type(ch->comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    if (err != MPI_SUCCESS) return dg_mpi_fail(err, c->ranks_per_node > 0 ? "MPI_Comm_split (nodes)" : "MPI_Comm_split_type", c);
    set_returns(node);
    ch->node_reduce = node;
    MPI_Comm_rank(node, &lr);
    MPI_Comm_size(node, &ls);
    if ((err = MPI_Comm_dup(node, &ch->node_bcast)) != MPI_SUCCESS) return dg_mpi_fail(err, "MPI_Comm_dup (node)", c);
    set_returns(ch->node_bcast);
    /* key = world rank: the leaders keep the world's order, and a node's leader is its lowest rank */
    if ((err = MPI_Comm_split(ch->comm, lr == 0 ? 0 : MPI_UNDEFINED, rank, &ch->leaders)) != MPI_SUCCESS)
        return dg_mpi_fail(err, "MPI_Comm_split (leaders)", c);
    set_returns(ch->leaders);
    if (first) {
        int lead = lr == 0, nodes = 0;
        if ((err = MPI_Allreduce(&lead, &nodes, 1, MPI_INT, MPI_SUM, ch->comm)) != MPI_SUCCESS)
            return dg_mpi_fail(err, "MPI_Allreduce (node count)", c);
        c->nodes = nodes;
        c->local_rank = lr;
        c->local_size = ls;
    }
    return 0;
}

void dg_mpi_hier_free(mpi_channel *ch) {
    MPI_Comm *all[] = { &ch->node_reduce, &ch->node_bcast, &ch->leaders };
    for (int i = 0; i < 3; i++)
        if (*all[i] != MPI_COMM_NULL) MPI_Comm_free(all[i]);
}

enum { ST_REDUCE, ST_LEADERS, ST_BCAST, ST_DONE };

typedef struct hier_op {
    mpi_channel *ch;
    uint64_t seq;                 /* start order on the channel */
    int stage;
    bool posted;                  /* the stage's requests are out */
    char *buf;
    int64_t n;
    dg_dtype dt;
    MPI_Op op;
    int pieces;
    MPI_Request req[];
} hier_op;

static bool leader(const hier_op *h) { return h->ch->leaders != MPI_COMM_NULL; }

/* Posts every piece of the current stage (none for a non-leader's leader stage). */
static int post(dg_comm *c, hier_op *h) {
    size_t es = dg_dtype_size(h->dt);
    int64_t piece = PIECE_BYTES / (int64_t)es;
    MPI_Datatype t = dg_mpi_type(h->dt);
    int k = 0, err = MPI_SUCCESS;
    const char *what = h->stage == ST_REDUCE ? "MPI_Ireduce (node)" : h->stage == ST_LEADERS ? "MPI_Iallreduce (leaders)"
                                                                                             : "MPI_Ibcast (node)";
    for (int64_t off = 0; off < h->n && err == MPI_SUCCESS; off += piece) {
        int cnt = (int)(h->n - off < piece ? h->n - off : piece);
        char *p = h->buf + (size_t)off * es;
        if (h->stage == ST_REDUCE)
            err = leader(h) ? MPI_Ireduce(MPI_IN_PLACE, p, cnt, t, h->op, 0, h->ch->node_reduce, &h->req[k])
                            : MPI_Ireduce(p, NULL, cnt, t, h->op, 0, h->ch->node_reduce, &h->req[k]);
        else if (h->stage == ST_LEADERS) {
            if (!leader(h)) break;
            err = MPI_Iallreduce(MPI_IN_PLACE, p, cnt, t, h->op, h->ch->leaders, &h->req[k]);
        } else err = MPI_Ibcast(p, cnt, t, 0, h->ch->node_bcast, &h->req[k]);
        if (err == MPI_SUCCESS) k++;
    }
    if (err != MPI_SUCCESS) {
        MPI_Waitall(k, h->req, MPI_STATUSES_IGNORE);   /* the pieces already posted still write the buffer */
        h->ch->failed = true;
        return dg_mpi_fail(err, what, c);
    }
    h->pieces = k;
    h->posted = true;
    if (h->stage == ST_LEADERS) h->ch->leaders_posted++;
    if (h->stage == ST_BCAST) h->ch->bcast_posted++;
    return 0;
}

int dg_mpi_hier_start(dg_comm *c, mpi_channel *ch, void *buf, int64_t n, dg_dtype dt, MPI_Op op, void **handle) {
    size_t es = dg_dtype_size(dt);
    int64_t piece = PIECE_BYTES / (int64_t)es, pieces = n ? (n + piece - 1) / piece : 0;
    hier_op *h = calloc(1, sizeof *h + sizeof(MPI_Request) * (size_t)(pieces ? pieces : 1));
    if (!h) { DG_ERR(DG_ENOMEM, "mpi: out of memory starting a hierarchical all-reduce"); return DG_ENOMEM; }
    *h = (hier_op){ .ch = ch, .seq = ch->started++, .stage = ST_REDUCE, .buf = buf, .n = n, .dt = dt, .op = op };
    int rc = post(c, h);
    if (rc) { free(h); return rc; }
    *handle = h;
    return 0;
}

/* Moves the operation on as far as its peers allow: a stage whose requests completed makes way
 * for the next, posted once every earlier operation of the channel has posted that stage. */
int dg_mpi_hier_poll(dg_comm *c, void *handle, bool *done) {
    hier_op *h = handle;
    int rc = 0;
    for (;;) {
        if (h->posted) {
            int flag = 0, err = MPI_Testall(h->pieces, h->req, &flag, MPI_STATUSES_IGNORE);
            if (err != MPI_SUCCESS) {
                MPI_Waitall(h->pieces, h->req, MPI_STATUSES_IGNORE);
                h->ch->failed = true;
                rc = dg_mpi_fail(err, "MPI_Testall (hierarchical all-reduce)", c);
                break;
            }
            if (!flag) { *done = false; return 0; }
            h->posted = false;
            h->stage++;
        }
        if (h->stage == ST_DONE) break;
        if (h->ch->failed) {   /* an earlier operation will never post its stage: nor will this one */
            DG_ERR(DG_ECOMM, "mpi: rank %d of %d: a hierarchical all-reduce started before this one failed", c->rank, c->size);
            rc = DG_ECOMM;
            break;
        }
        uint64_t turn = h->stage == ST_LEADERS ? h->ch->leaders_posted : h->ch->bcast_posted;
        if (turn != h->seq) { *done = false; return 0; }
        if ((rc = post(c, h))) break;
    }
    *done = true;
    free(h);
    return rc;
}
