/* head.c - series storage, postings, open chunks and chunk files. */
#include "head.h"
#include "../core/bytes.h"
#include "../core/log.h"
#include "../core/util.h"
#include "crc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define SLAB 4096
#define LPIECE (1u << 20) /* label-pool piece: 2^20 pair ids */
static const char chunk_magic[8] = {'M', 'W', 'C', 'H', 'N', 'K', '0', '1'};

int mw_head_init(mw_head *h, const char *chunk_dir, const char *tenant_label)
{
    memset(h, 0, sizeof(*h));
    mw_symtab_init(&h->sym);
    h->nslots = 1024;
    h->slots = mw_xcalloc(h->nslots, sizeof(uint64_t));
    h->tenant_name = UINT32_MAX;
    if (tenant_label && *tenant_label)
        h->tenant_name = mw_sym_intern(&h->sym, tenant_label, strlen(tenant_label));
    h->fd = -1;
    pthread_mutex_init(&h->fd_mu, NULL);
    if (mw_strlcpy(h->chunk_dir, chunk_dir, sizeof(h->chunk_dir)) >= sizeof(h->chunk_dir))
        return -ENAMETOOLONG;
    if (mkdir(chunk_dir, 0755) < 0 && errno != EEXIST) return -errno;
    return 0;
}

void mw_head_free(mw_head *h)
{
    for (uint32_t id = 0; id < h->next_id; id++) {
        mw_series *s = mw_head_series(h, id);
        free(s->chunk);
    }
    for (uint32_t i = 0; i < h->nslabs; i++)
        free(h->slabs[i]);
    free(h->slabs);
    free(h->slots);
    for (uint32_t p = 0; p < h->post_cap; p++)
        free(h->post[p].ids);
    free(h->post);
    for (uint32_t i = 0; i < h->nlpool; i++)
        free(h->lpool[i]);
    free(h->lpool);
    free(h->tenant_count);
    if (h->fd >= 0) close(h->fd);
    for (uint32_t i = 0; i < h->nfds; i++)
        if (h->fds[i] >= 0) close(h->fds[i]);
    free(h->fds);
    pthread_mutex_destroy(&h->fd_mu);
    mw_symtab_free(&h->sym);
    memset(h, 0, sizeof(*h));
    h->fd = -1;
}

uint64_t mw_labels_hash(const mw_label *labels, size_t n)
{
    uint64_t h = 0x6d6c7761746368ull; /* "mlwatch" */
    for (size_t i = 0; i < n; i++) {
        h = mw_hash64_inline(labels[i].name, strlen(labels[i].name), h);
        h = mw_hash64_inline(labels[i].value, strlen(labels[i].value), h);
    }
    return h;
}

static int same_labels(const mw_head *h, const mw_series *s, const mw_label *labels, size_t n)
{
    if (s->nlabels != n) return 0;
    const uint32_t *pairs = mw_head_labels(h, s);
    for (size_t i = 0; i < n; i++) {
        const uint32_t *p = h->sym.pairs[pairs[i]];
        if (strcmp(h->sym.strs[p[0]], labels[i].name) != 0 ||
            strcmp(h->sym.strs[p[1]], labels[i].value) != 0)
            return 0;
    }
    return 1;
}

int mw_head_lookup(const mw_head *h, const mw_label *labels, size_t n, uint64_t hash, uint32_t *id)
{
    uint32_t mask = h->nslots - 1, tag = (uint32_t)(hash >> 32);
    for (uint32_t i = (uint32_t)hash & mask;; i = (i + 1) & mask) {
        uint64_t v = h->slots[i];
        if (v == 0) return -1;
        if ((uint32_t)(v >> 32) != tag) continue;
        uint32_t cand = (uint32_t)v - 1;
        if (same_labels(h, mw_head_series(h, cand), labels, n)) {
            *id = cand;
            return 0;
        }
    }
}

uint64_t mw_head_series_hash(const mw_head *h, const mw_series *s)
{
    uint64_t x = 0x6d6c7761746368ull;
    const uint32_t *pairs = mw_head_labels(h, s);
    for (size_t i = 0; i < s->nlabels; i++) {
        const uint32_t *p = h->sym.pairs[pairs[i]];
        x = mw_hash64(h->sym.strs[p[0]], h->sym.lens[p[0]], x);
        x = mw_hash64(h->sym.strs[p[1]], h->sym.lens[p[1]], x);
    }
    return x;
}

static void index_insert(uint64_t *slots, uint32_t nslots, uint64_t hash, uint32_t id)
{
    uint32_t mask = nslots - 1;
    uint32_t i = (uint32_t)hash & mask;
    while (slots[i])
        i = (i + 1) & mask;
    slots[i] = (hash >> 32 << 32) | ((uint64_t)id + 1);
}

static void grow_index(mw_head *h)
{
    uint32_t n = h->nslots * 2;
    uint64_t *slots = mw_xcalloc(n, sizeof(uint64_t));
    for (uint32_t id = 0; id < h->next_id; id++) {
        mw_series *s = mw_head_series(h, id);
        if (s->flags & MW_SERIES_LIVE) index_insert(slots, n, mw_head_series_hash(h, s), id);
    }
    free(h->slots);
    h->slots = slots;
    h->nslots = n;
}

static uint32_t *pool_alloc(mw_head *h, size_t n, uint32_t *off)
{
    if (h->nlpool == 0 || h->lpos + n > LPIECE) {
        h->lpool = mw_xrealloc(h->lpool, (h->nlpool + 1) * sizeof(uint32_t *));
        h->lpool[h->nlpool++] = mw_xmalloc(LPIECE * sizeof(uint32_t));
        h->lpos = 0;
    }
    *off = ((h->nlpool - 1) << 20) | h->lpos;
    uint32_t *p = h->lpool[h->nlpool - 1] + h->lpos;
    h->lpos += (uint32_t)n;
    return p;
}

static void postings_add(mw_head *h, uint32_t pair, uint32_t id)
{
    if (pair >= h->post_cap) {
        uint32_t cap = h->post_cap ? h->post_cap : 1024;
        while (cap <= pair)
            cap *= 2;
        h->post = mw_xrealloc(h->post, cap * sizeof(mw_postings));
        memset(h->post + h->post_cap, 0, (cap - h->post_cap) * sizeof(mw_postings));
        h->post_cap = cap;
    }
    mw_postings *p = &h->post[pair];
    if (p->n == p->cap) {
        p->cap = p->cap < 4 ? 4 : p->cap < 4096 ? p->cap * 2 : p->cap + p->cap / 4;
        p->ids = mw_xrealloc(p->ids, p->cap * sizeof(uint32_t));
    }
    /* Ids arrive in increasing order except when restored out of order. */
    uint32_t i = p->n++;
    while (i > 0 && p->ids[i - 1] > id) {
        p->ids[i] = p->ids[i - 1];
        i--;
    }
    p->ids[i] = id;
}

uint32_t mw_head_tenant_of(const mw_head *h, const mw_label *labels, size_t n)
{
    if (h->tenant_name == UINT32_MAX) return UINT32_MAX;
    const char *tn = h->sym.strs[h->tenant_name];
    for (size_t i = 0; i < n; i++)
        if (strcmp(labels[i].name, tn) == 0) {
            uint32_t sym;
            return mw_sym_find(&h->sym, labels[i].value, strlen(labels[i].value), &sym) == 0
                       ? sym
                       : UINT32_MAX - 1; /* a value with no series yet */
        }
    return UINT32_MAX;
}

uint32_t mw_head_create(mw_head *h, const mw_label *labels, size_t n, uint64_t hash, uint32_t id)
{
    if (id == UINT32_MAX) id = h->next_id;
    while ((id >> 12) >= h->nslabs) {
        h->slabs = mw_xrealloc(h->slabs, (h->nslabs + 1) * sizeof(mw_series *));
        h->slabs[h->nslabs++] = mw_xcalloc(SLAB, sizeof(mw_series));
    }
    if (id >= h->next_id) h->next_id = id + 1;
    mw_series *s = mw_head_series(h, id);
    memset(s, 0, sizeof(*s));
    mw_gorilla_enc_init(&s->enc);
    uint32_t *pairs = pool_alloc(h, n, &s->labels);
    s->nlabels = (uint8_t)n;
    for (size_t i = 0; i < n; i++) {
        uint32_t name = mw_sym_intern(&h->sym, labels[i].name, strlen(labels[i].name));
        uint32_t value = mw_sym_intern(&h->sym, labels[i].value, strlen(labels[i].value));
        pairs[i] = mw_pair_intern(&h->sym, name, value);
        postings_add(h, pairs[i], id);
        if (name == h->tenant_name) {
            if (value >= h->tenant_cap) {
                uint32_t cap = h->tenant_cap ? h->tenant_cap : 256;
                while (cap <= value)
                    cap *= 2;
                h->tenant_count = mw_xrealloc(h->tenant_count, cap * sizeof(uint32_t));
                memset(h->tenant_count + h->tenant_cap, 0, (cap - h->tenant_cap) * 4);
                h->tenant_cap = cap;
            }
            h->tenant_count[value]++;
        }
    }
    s->flags = MW_SERIES_LIVE;
    h->nlive++;
    index_insert(h->slots, h->nslots, hash, id);
    if ((uint64_t)h->nlive * 4 > (uint64_t)h->nslots * 3) grow_index(h);
    return id;
}

int mw_head_check(const mw_series *s, int64_t t, double v)
{
    if (!(s->flags & MW_SERIES_HAS_LAST) || t > s->enc.t) return 0;
    if (t < s->enc.t) return -1;
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    return bits == s->enc.vbits ? 1 : -2;
}

/* ---- chunk files ---- */

static void chunk_path(const mw_head *h, uint32_t seq, char *out, size_t size)
{
    snprintf(out, size, "%s/%08u", h->chunk_dir, seq);
}

static int read_fd_locked(mw_head *h, uint32_t seq)
{
    if (seq == h->seq && h->fd >= 0) return h->fd;
    if (seq < h->min_seq || seq > h->seq) return -1;
    uint32_t i = seq - h->min_seq;
    if (i >= h->nfds) {
        h->fds = mw_xrealloc(h->fds, (i + 1) * sizeof(int));
        for (uint32_t k = h->nfds; k <= i; k++)
            h->fds[k] = -1;
        h->nfds = i + 1;
    }
    if (h->fds[i] < 0) {
        char path[PATH_MAX + 16];
        chunk_path(h, seq, path, sizeof(path));
        h->fds[i] = open(path, O_RDONLY | O_CLOEXEC);
    }
    return h->fds[i];
}

int mw_head_read_fd(mw_head *h, uint32_t seq)
{
    pthread_mutex_lock(&h->fd_mu);
    int fd = read_fd_locked(h, seq);
    pthread_mutex_unlock(&h->fd_mu);
    return fd;
}

void mw_head_forget_files_before(mw_head *h, uint32_t seq)
{
    /* Chunk files before seq were compacted into a block and deleted. */
    pthread_mutex_lock(&h->fd_mu);
    while (h->min_seq < seq && h->min_seq <= h->seq) {
        if (h->nfds) {
            if (h->fds[0] >= 0) close(h->fds[0]);
            memmove(h->fds, h->fds + 1, (h->nfds - 1) * sizeof(int));
            h->nfds--;
        }
        h->min_seq++;
    }
    pthread_mutex_unlock(&h->fd_mu);
}

int mw_chunk_parse(const uint8_t *p, size_t n, mw_chunk_hdr *hdr)
{
    if (n < MW_CHUNK_HDR_SIZE + 4) return -1;
    hdr->series = mw_get_le32(p);
    hdr->n = mw_get_le16(p + 4);
    hdr->nbytes = mw_get_le16(p + 6);
    hdr->mint = (int64_t)mw_get_le64(p + 8);
    hdr->maxt = (int64_t)mw_get_le64(p + 16);
    hdr->prev_ref = mw_get_le64(p + 24);
    if ((size_t)MW_CHUNK_HDR_SIZE + hdr->nbytes + 4 > n) return -1;
    uint32_t crc = mw_crc32(p, MW_CHUNK_HDR_SIZE + hdr->nbytes);
    if (crc != mw_get_le32(p + MW_CHUNK_HDR_SIZE + hdr->nbytes)) return -1;
    return 0;
}

int mw_head_chunks_rotate(mw_head *h)
{
    uint32_t seq = h->seq + 1;
    char path[PATH_MAX + 16];
    chunk_path(h, seq, path, sizeof(path));
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    if (pwrite(fd, chunk_magic, sizeof(chunk_magic), 0) != (ssize_t)sizeof(chunk_magic)) {
        int e = errno ? errno : ENOSPC;
        close(fd);
        unlink(path);
        return -e;
    }
    if (h->fd >= 0) {
        fdatasync(h->fd);
        close(h->fd);
    }
    h->fd = fd;
    h->seq = seq;
    h->size = sizeof(chunk_magic);
    if (h->min_seq == 0) h->min_seq = seq;
    return 0;
}

int mw_head_chunks_open(mw_head *h, uint32_t active_seq, uint64_t active_size)
{
    /* Files after the active one were written after the snapshot that
     * restores the head: replaying the WAL writes their chunks again. */
    DIR *d = opendir(h->chunk_dir);
    if (!d) return -errno;
    uint32_t min_seq = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        unsigned long seq = strtoul(e->d_name, &end, 10);
        if (*end || e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        if (active_seq == 0 || seq > active_seq) {
            char path[PATH_MAX + 300];
            snprintf(path, sizeof(path), "%s/%s", h->chunk_dir, e->d_name);
            unlink(path);
            continue;
        }
        if (min_seq == 0 || seq < min_seq) min_seq = (uint32_t)seq;
    }
    closedir(d);
    h->min_seq = min_seq;
    if (active_seq == 0) {
        h->seq = 0;
        h->min_seq = 0;
        return mw_head_chunks_rotate(h);
    }
    char path[PATH_MAX + 16];
    chunk_path(h, active_seq, path, sizeof(path));
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        /* The active file is gone (compacted): start a new one after it. */
        h->seq = active_seq;
        if (h->min_seq == 0) h->min_seq = active_seq + 1;
        return mw_head_chunks_rotate(h);
    }
    if (ftruncate(fd, (off_t)active_size) < 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    h->fd = fd;
    h->seq = active_seq;
    h->size = active_size;
    return 0;
}

/* Write the open chunk of s to the active chunk file and empty it. */
static int cut_chunk(mw_head *h, uint32_t id, mw_series *s)
{
    if (h->size + MW_CHUNK_HDR_SIZE + 4 + mw_gorilla_bytes(&s->enc) > MW_CHUNK_FILE_MAX) {
        int rc = mw_head_chunks_rotate(h);
        if (rc < 0) return rc;
    }
    size_t nbytes = mw_gorilla_bytes(&s->enc);
    uint8_t rec[MW_CHUNK_HDR_SIZE + 4 + 65536];
    /* The first timestamp is the chunk's first 8 bytes, big-endian bits. */
    uint64_t mint = mw_get_be64(s->chunk);
    mw_put_le32(rec, id);
    mw_put_le16(rec + 4, (uint16_t)s->enc.n);
    mw_put_le16(rec + 6, (uint16_t)nbytes);
    mw_put_le64(rec + 8, mint);
    mw_put_le64(rec + 16, (uint64_t)s->enc.t);
    mw_put_le64(rec + 24, s->last_ref);
    memcpy(rec + MW_CHUNK_HDR_SIZE, s->chunk, nbytes);
    mw_put_le32(rec + MW_CHUNK_HDR_SIZE + nbytes, mw_crc32(rec, MW_CHUNK_HDR_SIZE + nbytes));
    size_t len = MW_CHUNK_HDR_SIZE + nbytes + 4;
    ssize_t w = pwrite(h->fd, rec, len, (off_t)h->size);
    if (w != (ssize_t)len) {
        int err = w < 0 ? errno : ENOSPC;
        h->chunk_write_errors++;
        h->chunk_errno = err;
        /* A partial record past h->size is overwritten by the next write. */
        return -err;
    }
    h->chunk_errno = 0;
    s->last_ref = (uint64_t)h->seq << 32 | h->size;
    h->size += len;
    h->chunks_cut++;
    /* Keep the last sample (t, vbits) for ordering checks; start afresh. */
    int64_t t = s->enc.t;
    uint64_t vbits = s->enc.vbits;
    mw_gorilla_enc_init(&s->enc);
    s->enc.t = t;
    s->enc.vbits = vbits;
    mw_head_chunk_resize(h, s, 0);
    return 0;
}

void mw_head_chunk_resize(mw_head *h, mw_series *s, size_t cap)
{
    /* malloc, not slabs per size: a chunk grows through every size while
     * it fills, and only malloc lets the memory move between sizes. */
    if (cap == 0) {
        free(s->chunk);
        s->chunk = NULL;
    } else {
        s->chunk = mw_xrealloc(s->chunk, cap);
    }
    h->chunk_bytes += cap;
    h->chunk_bytes -= s->chunk_cap;
    s->chunk_cap = (uint16_t)cap;
}

/* The size at which the open chunk of series id is cut. A series' first
 * chunk is cut early, at between 1/8 and all of MW_HEAD_CHUNK_BYTES (spread
 * by id): a node's series are created together at start and most fill at
 * the same pace (a value that does not change costs two bits a sample), so
 * without the spread they would all be nearly full at the same moment,
 * every few minutes, and the heap keeps that peak (twice the mean). */
uint32_t mw_head_cut_size(const mw_series *s, uint32_t id)
{
    if (s->last_ref) return MW_HEAD_CHUNK_BYTES;
    uint32_t spread = (id * 2654435761u) >> 25; /* Fibonacci hashing: 0..127 */
    return MW_HEAD_CHUNK_BYTES / 8 + spread * (MW_HEAD_CHUNK_BYTES - MW_HEAD_CHUNK_BYTES / 8) / 128;
}

void mw_head_append(mw_head *h, uint32_t id, int64_t t, double v)
{
    mw_series *s = mw_head_series(h, id);
    /* Exactly the bytes the sample needs, rounded to what glibc's malloc
     * hands out anyway (16-byte granules less its 8-byte header). */
    size_t need = (mw_gorilla_bits_after(&s->enc, t, v) + 7) / 8;
    if (need > s->chunk_cap) mw_head_chunk_resize(h, s, ((need + 8 + 15) & ~(size_t)15) - 8);
    mw_gorilla_append(&s->enc, s->chunk, t, v);
    s->flags |= MW_SERIES_HAS_LAST;
    h->samples++;
    /* Cut when full; when the chunk file cannot be written (disk full) the
     * chunk grows on, up to the most a chunk can hold. */
    if ((mw_gorilla_bytes(&s->enc) >= mw_head_cut_size(s, id) &&
         (h->chunk_errno == 0 || mw_gorilla_bytes(&s->enc) >= 4096)) ||
        s->enc.n == 65535 || mw_gorilla_bytes(&s->enc) + MW_GORILLA_MAX_SAMPLE_BYTES > 65535 - 32)
        cut_chunk(h, id, s);
}

int mw_head_cut_all(mw_head *h)
{
    for (uint32_t id = 0; id < h->next_id; id++) {
        mw_series *s = mw_head_series(h, id);
        if ((s->flags & MW_SERIES_LIVE) && s->enc.n > 0) {
            int rc = cut_chunk(h, id, s);
            if (rc < 0) return rc;
        }
    }
    return 0;
}

int mw_head_chunk_read(mw_head *h, uint64_t ref, mw_chunk_hdr *hdr, uint8_t *buf, size_t bufsize)
{
    int fd = mw_head_read_fd(h, (uint32_t)(ref >> 32));
    if (fd < 0 || bufsize < MW_CHUNK_HDR_SIZE + 4) return -1;
    ssize_t r = pread(fd, buf, bufsize, (off_t)(uint32_t)ref);
    if (r < MW_CHUNK_HDR_SIZE + 4) return -1;
    return mw_chunk_parse(buf, (size_t)r, hdr);
}

int mw_samples_push(mw_samples *s, int64_t t, double v)
{
    if (s->max && s->n >= s->max) return -1;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->t = mw_xrealloc(s->t, s->cap * sizeof(int64_t));
        s->v = mw_xrealloc(s->v, s->cap * sizeof(double));
    }
    s->t[s->n] = t;
    s->v[s->n] = v;
    s->n++;
    return 0;
}

static int decode_into(const uint8_t *bytes, size_t nbytes, uint32_t n, int64_t mint, int64_t maxt,
                       mw_samples *out)
{
    mw_gorilla_dec d;
    mw_gorilla_dec_init(&d, bytes, nbytes, n);
    int64_t t;
    double v;
    int rc;
    while ((rc = mw_gorilla_next(&d, &t, &v)) == 1) {
        if (t < mint) continue;
        if (t > maxt) break;
        if (mw_samples_push(out, t, v) < 0) return -1;
    }
    return 0;
}

/* Bytes read per chunk record while walking the chain: enough for a head
 * chunk (cut once past MW_HEAD_CHUNK_BYTES: at most one sample, under 20
 * bytes, beyond it), so that each chunk costs one small pread. A larger
 * record is read again whole. */
#define READ_AHEAD (MW_CHUNK_HDR_SIZE + 4 + MW_HEAD_CHUNK_BYTES + 32)

int mw_head_read(mw_head *h, uint32_t id, int64_t mint, int64_t maxt, mw_samples *out)
{
    mw_series *s = mw_head_series(h, id);
    /* Walk the chunk chain back to the first chunk that may hold mint,
     * keeping each record's bytes, then decode forwards. Reading exactly the
     * record (not a 64 KiB buffer) matters: a range query reads every chunk
     * of thousands of series. */
    typedef struct rec {
        uint64_t ref;
        size_t off, len; /* in bytes; len 0 = read again in the second pass */
    } rec;
    /* On the stack for the usual few chunks (a malloc per series showed in
     * profiles), on the heap beyond. */
    rec small[32], *recs = small;
    size_t nrecs = 0, caprecs = 32;
    uint8_t stack[24 * READ_AHEAD], *bytes = stack;
    size_t nbytes = 0, capbytes = sizeof(stack);
    for (uint64_t ref = s->last_ref; ref && (uint32_t)(ref >> 32) >= h->min_seq;) {
        if (nbytes + READ_AHEAD > capbytes) {
            uint8_t *nb = mw_xmalloc(capbytes * 2);
            memcpy(nb, bytes, nbytes);
            if (bytes != stack) free(bytes); // cppcheck-suppress autovarInvalidDeallocation
            bytes = nb;
            capbytes *= 2;
        }
        ssize_t r = pread(mw_head_read_fd(h, (uint32_t)(ref >> 32)), bytes + nbytes, READ_AHEAD,
                          (off_t)(uint32_t)ref);
        if (r < MW_CHUNK_HDR_SIZE) break;
        int64_t cmax = (int64_t)mw_get_le64(bytes + nbytes + 16);
        if (cmax < mint) break;
        size_t need = MW_CHUNK_HDR_SIZE + 4 + (size_t)mw_get_le16(bytes + nbytes + 6);
        if (nrecs == caprecs) {
            rec *nr = mw_xmalloc(caprecs * 2 * sizeof(rec));
            memcpy(nr, recs, nrecs * sizeof(rec));
            if (recs != small) free(recs); // cppcheck-suppress autovarInvalidDeallocation
            recs = nr;
            caprecs *= 2;
        }
        recs[nrecs++] = (rec){ref, nbytes, (size_t)r >= need ? need : 0};
        nbytes += (size_t)r >= need ? need : MW_CHUNK_HDR_SIZE;
        ref = mw_get_le64(bytes + recs[nrecs - 1].off + 24);
    }
    int rc = 0;
    uint8_t *big = NULL;
    mw_chunk_hdr hdr;
    for (size_t k = nrecs; k-- > 0 && rc == 0;) {
        const uint8_t *p = bytes + recs[k].off;
        int bad;
        if (recs[k].len) {
            bad = mw_chunk_parse(p, recs[k].len, &hdr) < 0;
        } else {
            if (!big) big = mw_xmalloc(MW_CHUNK_HDR_SIZE + 4 + 65536);
            bad = mw_head_chunk_read(h, recs[k].ref, &hdr, big, MW_CHUNK_HDR_SIZE + 4 + 65536) < 0;
            p = big;
        }
        if (bad) {
            mw_log_once(MW_LOG_ERROR, "store", "chunk-crc",
                        "chunk file %08u offset %u: bad "
                        "checksum; its samples are skipped",
                        (unsigned)(recs[k].ref >> 32), (unsigned)recs[k].ref);
            continue;
        }
        if (hdr.mint > maxt) break;
        rc = decode_into(p + MW_CHUNK_HDR_SIZE, hdr.nbytes, hdr.n, mint, maxt, out);
    }
    free(big);
    if (recs != small) free(recs);   // cppcheck-suppress autovarInvalidDeallocation
    if (bytes != stack) free(bytes); // cppcheck-suppress autovarInvalidDeallocation
    if (rc == 0 && s->enc.n > 0)
        rc = decode_into(s->chunk, mw_gorilla_bytes(&s->enc), s->enc.n, mint, maxt, out);
    return rc;
}

/* ---- index ops ---- */

/* The postings of name=value, or NULL. */
static const mw_postings *head_postings(mw_head *h, const char *name, const char *value)
{
    uint32_t n, v, p;
    if (mw_sym_find(&h->sym, name, strlen(name), &n) < 0 ||
        mw_sym_find(&h->sym, value, strlen(value), &v) < 0 || mw_pair_find(&h->sym, n, v, &p) < 0 ||
        p >= h->post_cap)
        return NULL;
    return &h->post[p];
}

static void head_lookup(void *ctx, const char *name, const char *value, mw_postings_fn fn,
                        void *arg)
{
    const mw_postings *p = head_postings(ctx, name, value);
    if (p) fn(arg, p->ids, p->n);
}

static size_t head_count(void *ctx, const char *name, const char *value)
{
    const mw_postings *p = head_postings(ctx, name, value);
    return p ? p->n : 0;
}

static void head_values(void *ctx, const char *name,
                        void (*fn)(void *arg, const char *value, const uint32_t *ids, size_t n),
                        void *arg)
{
    mw_head *h = ctx;
    uint32_t n;
    if (mw_sym_find(&h->sym, name, strlen(name), &n) < 0) return;
    for (uint32_t p = 0; p < h->sym.npairs && p < h->post_cap; p++)
        if (h->sym.pairs[p][0] == n && h->post[p].n)
            fn(arg, h->sym.strs[h->sym.pairs[p][1]], h->post[p].ids, h->post[p].n);
}

static void head_all(void *ctx, mw_ids *out)
{
    mw_head *h = ctx;
    for (uint32_t id = 0; id < h->next_id; id++)
        if (mw_head_series(h, id)->flags & MW_SERIES_LIVE) mw_ids_push(out, id);
}

const mw_index_ops mw_head_index_ops = {head_lookup, head_values, head_all, head_count};

size_t mw_head_memory(const mw_head *h)
{
    /* The series slabs and label-pool pieces are large zeroed allocations
     * (their own mappings) touched only as far as they are used: count that
     * part, not their size. The first pool piece alone is 4 MiB, of which a
     * node of 7,000 series uses ~0.2 MB. */
    size_t series = (size_t)h->next_id * sizeof(mw_series);
    size_t pool = h->nlpool ? ((size_t)(h->nlpool - 1) * LPIECE + h->lpos) * 4 : 0;
    size_t m = mw_symtab_memory(&h->sym) + series + (size_t)h->nslots * 8 + pool + h->chunk_bytes +
               (size_t)h->post_cap * sizeof(mw_postings) + (size_t)h->tenant_cap * 4;
    for (uint32_t p = 0; p < h->post_cap; p++)
        m += (size_t)h->post[p].cap * 4;
    return m;
}
