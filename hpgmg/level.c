/*
 * hpgmg/level.c - creation of a level: Z-Morton distribution of the boxes,
 * box storage with ghost zones, boundary-region lists, communicators.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "level.h"

int hg_radius(hg_operator_t op) { return op == HG_OP_FV4 ? 2 : 1; }

double *hg_box(hg_level_t *L, int vec, int b)
{
    return L->vec[vec] + (size_t)b * L->vol + L->ghosts * (1 + L->js + L->ks);
}

/* de-interleave the bits of a Morton code into (i,j,k) */
static void morton_decode(uint64_t m, int *i, int *j, int *k)
{
    int a = 0, b = 0, c = 0;
    for (int bit = 0; bit < 21; bit++) {
        a |= (int)((m >> (3 * bit + 0)) & 1) << bit;
        b |= (int)((m >> (3 * bit + 1)) & 1) << bit;
        c |= (int)((m >> (3 * bit + 2)) & 1) << bit;
    }
    *i = a;
    *j = b;
    *k = c;
}

/* Does direction dir (-1, 0, 1) along an axis leave the domain, from a
 * box whose low corner along it is lo? */
static int outside(const hg_level_t *L, int dir, int lo)
{
    return (dir < 0 && lo == 0) || (dir > 0 && lo + L->box_dim == L->dim);
}

/* The ghost regions outside the domain, per shape: first those outside
 * along every axis they extend beyond the box (their values come from the
 * box's own cells: no ghost cell an exchange fills), then the others. */
static void build_bc_lists(hg_level_t *L)
{
    for (int s = 0; s < HG_NUM_SHAPES; s++) {
        L->bc[s] = hg_alloc(sizeof(int) * 2 * 26 * (size_t)(L->nb ? L->nb : 1), HG_MEM_HOST);
        int n = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (int b = 0; b < L->nb; b++) {
                const int *lo = L->low + 3 * b;
                for (int d = 0; d < 27; d++) {
                    const int di = hg_dir_di(d), dj = hg_dir_dj(d), dk = hg_dir_dk(d);
                    if (!hg_shape_has(s, di, dj, dk))
                        continue;
                    const int oi = outside(L, di, lo[0]), oj = outside(L, dj, lo[1]),
                              ok = outside(L, dk, lo[2]);
                    if (!(oi || oj || ok))
                        continue;
                    const int own = (!di || oi) && (!dj || oj) && (!dk || ok);
                    if (own != (pass == 0))
                        continue;
                    L->bc[s][2 * n] = b;
                    L->bc[s][2 * n + 1] = d;
                    n++;
                }
            }
            if (pass == 0)
                L->nbc_own[s] = n;
        }
        L->nbc[s] = n;
    }
}

static void set_geom(hg_level_t *L)
{
    L->geom.nb = L->nb;
    L->geom.n = L->box_dim;
    L->geom.g = L->ghosts;
    L->geom.js = L->js;
    L->geom.ks = L->ks;
    L->geom.vol = L->vol;
    L->geom.dim = L->dim;
    L->geom.low = L->low;
}

void hg_level_create(hg_mg_t *mg, hg_level_t *L, int id, int boxes_in, int box_dim, int ghosts,
                     int nvec, int nprocs)
{
    memset(L, 0, sizeof(*L));
    L->id = id;
    L->box_dim = box_dim;
    L->ghosts = ghosts;
    L->boxes_in = boxes_in;
    L->dim = boxes_in * box_dim;
    L->num_boxes = boxes_in * boxes_in * boxes_in;
    L->nprocs = nprocs;
    L->h = 1.0 / (double)L->dim;
    L->mem = mg->use_cuda ? HG_MEM_PINNED : HG_MEM_HOST;
    L->vec_mem = L->mem;
    L->comm = MPI_COMM_NULL;
    if (mg->my_rank == 0) {
        fprintf(stdout,
                "\nattempting to create a %d^3 level from %d x %d^3 boxes distributed among %d "
                "tasks...\n",
                L->dim, L->num_boxes, box_dim, nprocs);
        fprintf(stdout, "  boundary condition = BC_DIRICHLET\n");
        fprintf(stdout, "  Decomposing level via Z-mort ordering... ");
        fflush(stdout);
    }

    /* Z-Morton order over the enclosing power-of-two cube; the boxes are cut
   * into nprocs contiguous pieces of that order */
    int p2 = 1;
    while (p2 < boxes_in)
        p2 *= 2;
    L->rank_of_box = malloc(sizeof(int) * L->num_boxes);
    L->local_of_box = malloc(sizeof(int) * L->num_boxes);
    L->my_id = malloc(sizeof(int) * L->num_boxes);
    int *tmp_low = malloc(sizeof(int) * 3 * L->num_boxes);
    int64_t idx = 0;
    L->nb = 0;
    for (uint64_t m = 0; m < (uint64_t)p2 * p2 * p2; m++) {
        int i, j, k;
        morton_decode(m, &i, &j, &k);
        if (i >= boxes_in || j >= boxes_in || k >= boxes_in)
            continue;
        int box = i + boxes_in * (j + boxes_in * k);
        int rank = (int)(idx * nprocs / L->num_boxes);
        L->rank_of_box[box] = rank;
        L->local_of_box[box] = -1;
        if (rank == mg->my_rank) {
            L->local_of_box[box] = L->nb;
            L->my_id[L->nb] = box;
            tmp_low[3 * L->nb + 0] = i * box_dim;
            tmp_low[3 * L->nb + 1] = j * box_dim;
            tmp_low[3 * L->nb + 2] = k * box_dim;
            L->nb++;
        }
        idx++;
    }
    L->low = hg_alloc(sizeof(int) * 3 * (size_t)(L->nb ? L->nb : 1), HG_MEM_HOST);
    memcpy(L->low, tmp_low, sizeof(int) * 3 * L->nb);
    free(tmp_low);
    if (mg->my_rank == 0) {
        fprintf(stdout, "done\n  Allocating vectors... ");
        fflush(stdout);
    }

    L->js = box_dim + 2 * ghosts;
    L->ks = L->js * L->js;
    L->vol = L->ks * L->js;
    L->nvec = 0;
    L->vec = NULL;
    hg_level_add_vectors(mg, L, nvec);
    L->partial = hg_alloc(sizeof(double) * (size_t)(L->nb ? L->nb : 1), L->mem);
    /* in L->mem: a GPU level's kernels write them (stream-ordered reductions) */
    L->gpartial = hg_alloc(sizeof(double) * (size_t)L->num_boxes, L->mem);
    L->red_ids = hg_alloc(sizeof(int) * (size_t)(L->nb ? L->nb : 1), L->mem);
    memcpy(L->red_ids, L->my_id, sizeof(int) * (size_t)L->nb);
    L->red_norm = hg_alloc(sizeof(double) * HG_RED_NORM_SLOTS, L->mem);
    set_geom(L);
    build_bc_lists(L);
    L->exec = &mg->host;
    if (mg->my_rank == 0) {
        fprintf(stdout, "done\n");
        fflush(stdout);
    }
}

void hg_level_add_vectors(hg_mg_t *mg, hg_level_t *L, int nvec)
{
    (void)mg;
    if (nvec <= L->nvec)
        return;
    double **v = malloc(sizeof(double *) * nvec);
    for (int i = 0; i < L->nvec; i++)
        v[i] = L->vec[i];
    for (int i = L->nvec; i < nvec; i++)
        v[i] = hg_alloc(sizeof(double) * (size_t)(L->nb ? L->nb : 1) * L->vol, L->mem);
    free(L->vec);
    L->vec = v;
    L->nvec = nvec;
}

void hg_level_build_comm(hg_mg_t *mg)
{
    MPI_Group world_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    int *wr = malloc(sizeof(int) * mg->num_ranks);
    for (int r = 0; r < mg->num_ranks; r++)
        wr[r] = r;
    if (mg->my_rank == 0)
        fprintf(stdout, "\n");
    for (int l = 0; l < mg->nlevels; l++) {
        hg_level_t *L = mg->levels[l];
        double t0 = MPI_Wtime();
        if (mg->my_rank == 0) {
            fprintf(stdout, "  Building MPI subcommunicator for level %2d... ", l);
            fflush(stdout);
        }
        L->active = 0;
        for (int m = l; m < mg->nlevels; m++)
            if (mg->levels[m]->nb > 0)
                L->active = 1;
        MPI_Comm_split(MPI_COMM_WORLD, L->active ? 0 : MPI_UNDEFINED, mg->my_rank, &L->comm);
        if (mg->no_wildcards && L->comm != MPI_COMM_NULL) {
            /* every receive names its source and tag (comm.c): say so */
            MPI_Info info;
            MPI_Info_create(&info);
            MPI_Info_set(info, "mpi_assert_no_any_source", "true");
            MPI_Info_set(info, "mpi_assert_no_any_tag", "true");
            MPI_Comm_set_info(L->comm, info);
            MPI_Info_free(&info);
        }
        L->comm_rank = malloc(sizeof(int) * mg->num_ranks);
        for (int r = 0; r < mg->num_ranks; r++)
            L->comm_rank[r] = -1;
        if (L->comm != MPI_COMM_NULL) {
            MPI_Group g;
            MPI_Comm_group(L->comm, &g);
            MPI_Group_translate_ranks(world_group, mg->num_ranks, wr, g, L->comm_rank);
            for (int r = 0; r < mg->num_ranks; r++)
                if (L->comm_rank[r] == MPI_UNDEFINED)
                    L->comm_rank[r] = -1;
            MPI_Group_free(&g);
        }
        double dt = MPI_Wtime() - t0, dmax;
        MPI_Allreduce(&dt, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (mg->my_rank == 0) {
            fprintf(stdout, "done (%0.6f seconds)\n", dmax);
            fflush(stdout);
        }
    }
    free(wr);
    MPI_Group_free(&world_group);
}

/* copy of host data in device memory */
static void *to_device(const void *src, size_t bytes)
{
    void *d = hg_alloc(bytes, HG_MEM_DEVICE);
    hg_copy(d, src, bytes);
    return d;
}

void hg_level_to_device(hg_level_t *L)
{
    const size_t bytes = sizeof(double) * (size_t)(L->nb ? L->nb : 1) * L->vol;
    for (int v = 0; v < L->nvec; v++) {
        double *d = to_device(L->vec[v], bytes);
        hg_free(L->vec[v], L->vec_mem);
        L->vec[v] = d;
    }
    L->vec_mem = HG_MEM_DEVICE;
    L->low_dev = to_device(L->low, sizeof(int) * 3 * (size_t)(L->nb ? L->nb : 1));
    L->geom.low = L->low_dev;
    for (int s = 0; s < HG_NUM_SHAPES; s++)
        L->bc_dev[s] = to_device(L->bc[s], sizeof(int) * 2 * (size_t)(L->nbc[s] ? L->nbc[s] : 1));
}

static void prog_free(hg_prog_t *P)
{
    if (!P->built)
        return;
    free(P->send_rank);
    free(P->send_count);
    free(P->send_off);
    free(P->recv_rank);
    free(P->recv_count);
    free(P->recv_off);
    hg_free(P->send_host, HG_MEM_HOST);
    hg_free(P->recv_host, HG_MEM_HOST);
    if (P->send_gpu)
        hg_free(P->send_gpu, P->gpu_mem);
    if (P->recv_gpu[0])
        hg_free(P->recv_gpu[0], P->gpu_mem);
    if (P->recv_gpu[1])
        hg_free(P->recv_gpu[1], P->gpu_mem);
    hg_free(P->pack, HG_MEM_HOST);
    hg_free(P->local, HG_MEM_HOST);
    hg_free(P->unpack, HG_MEM_HOST);
    hg_free(P->pack_dev, HG_MEM_DEVICE);
    hg_free(P->local_dev, HG_MEM_DEVICE);
    hg_free(P->unpack_dev, HG_MEM_DEVICE);
    free(P->req);
    free(P->stat);
    hg_prog_free_ki(P);
    memset(P, 0, sizeof(*P));
}

void hg_level_free(hg_level_t *L)
{
    for (int s = 0; s < HG_NUM_SHAPES; s++) {
        prog_free(&L->exchange[s]);
        hg_free(L->bc[s], HG_MEM_HOST);
        hg_free(L->bc_dev[s], HG_MEM_DEVICE);
    }
    for (int r = 0; r < 4; r++)
        prog_free(&L->restriction[r]);
    prog_free(&L->interpolation);
    for (int v = 0; v < L->nvec; v++)
        hg_free(L->vec[v], L->vec_mem);
    free(L->vec);
    hg_free(L->low, HG_MEM_HOST);
    hg_free(L->low_dev, HG_MEM_DEVICE);
    hg_free(L->partial, L->mem);
    hg_free(L->gpartial, L->mem);
    hg_free(L->red_ids, L->mem);
    hg_free(L->red_norm, L->mem);
    free(L->rank_of_box);
    free(L->local_of_box);
    free(L->my_id);
    free(L->comm_rank);
    if (L->comm != MPI_COMM_NULL)
        MPI_Comm_free(&L->comm);
}
