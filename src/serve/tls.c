/* tls.c - HTTPS for serve/http.c: GnuTLS credentials behind libmicrohttpd.
 *
 * libmicrohttpd keeps a certificate given as MHD_OPTION_HTTPS_MEM_CERT/KEY
 * for the daemon's life, so a rotated certificate would need a restart of
 * the daemon (and every connection with it). Instead the daemon asks us at
 * each handshake (MHD_OPTION_HTTPS_CERT_CALLBACK, GnuTLS's retrieve
 * function): at most once a second, that looks at both files and, when one
 * changed, loads the pair and uses it from the next handshake on, if the
 * key matches the certificate (a certificate written before its key keeps
 * the old pair until the key follows). A replaced pair is kept for an hour,
 * since handshakes already under way point at it, then freed.
 *
 * The client CA goes to libmicrohttpd as MHD_OPTION_HTTPS_MEM_TRUST, read
 * at start: that makes libmicrohttpd ask clients for a certificate (GnuTLS
 * does not fail a handshake over it). mw_tls_peer_verified() checks the one
 * presented against a trust list of our own, which it re-reads from
 * --tls-client-ca-file when the file changes (checked at most once a
 * second), so a rotated CA needs no restart either; a file that turns
 * unreadable or holds no CA keeps the last good list (logged). */
#include "tls.h"
#include "../core/log.h"
#include "../core/util.h"

#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_CHAIN 16
#define PEM_MAX (1 << 20)
#define RECHECK_MS 1000
#define RETIRED_KEEP_MS (3600 * 1000)

typedef struct cert_pair {
    gnutls_pcert_st pcert[MAX_CHAIN];
    unsigned n;
    gnutls_privkey_t key;
    struct stat cert_st, key_st;
    int64_t retired_ms;
    struct cert_pair *next; /* retired list */
} cert_pair;

struct mw_tls {
    char cert_file[4096], key_file[4096];
    char *client_ca; /* PEM text for libmicrohttpd, or NULL */
    /* The client CAs that verify (ca_mu): re-read when the file changes. */
    char client_ca_file[4096];
    pthread_mutex_t ca_mu;
    gnutls_x509_trust_list_t trust;
    struct stat ca_st;
    int64_t ca_checked_ms;
    pthread_mutex_t mu;
    cert_pair *current;
    cert_pair *retired;
    int64_t checked_ms;
    struct MHD_OptionItem items[3];
};

/* GnuTLS's retrieve function has no closure argument. */
static mw_tls *the_tls;

static int64_t monotonic_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static char *read_pem(const char *path, struct stat *st, size_t *len, char *err, size_t errsize)
{
    FILE *f = fopen(path, "rbe");
    if (!f) {
        snprintf(err, errsize, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fileno(f), st) < 0 || !S_ISREG(st->st_mode) || st->st_size > PEM_MAX) {
        snprintf(err, errsize, "%s: not a regular file of at most %d bytes", path, PEM_MAX);
        fclose(f);
        return NULL;
    }
    char *text = mw_xmalloc((size_t)st->st_size + 1);
    *len = fread(text, 1, (size_t)st->st_size, f);
    text[*len] = '\0';
    fclose(f);
    return text;
}

static void wipe_free(char *p, size_t n)
{
    if (!p) return;
    memset(p, 0, n);
    __asm__ __volatile__("" ::"r"(p) : "memory");
    free(p);
}

static void pair_free(cert_pair *p)
{
    if (!p) return;
    for (unsigned i = 0; i < p->n; i++)
        gnutls_pcert_deinit(&p->pcert[i]);
    if (p->key) gnutls_privkey_deinit(p->key);
    free(p);
}

/* The key's public half is the certificate's. */
static int key_matches(cert_pair *p)
{
    gnutls_pubkey_t pub;
    if (gnutls_pubkey_init(&pub) < 0) return 0;
    unsigned char a[64], b[64];
    size_t la = sizeof(a), lb = sizeof(b);
    int ok = gnutls_pubkey_import_privkey(pub, p->key, 0, 0) == 0 &&
             gnutls_pubkey_get_key_id(pub, 0, a, &la) == 0 &&
             gnutls_pubkey_get_key_id(p->pcert[0].pubkey, 0, b, &lb) == 0 && la == lb &&
             memcmp(a, b, la) == 0;
    gnutls_pubkey_deinit(pub);
    return ok;
}

static cert_pair *load_pair(const char *cert_file, const char *key_file, char *err, size_t errsize)
{
    cert_pair *p = mw_xcalloc(1, sizeof(*p));
    size_t clen = 0, klen = 0;
    char *cert = read_pem(cert_file, &p->cert_st, &clen, err, errsize);
    char *key = cert ? read_pem(key_file, &p->key_st, &klen, err, errsize) : NULL;
    int rc;
    if (!key) goto fail;
    gnutls_datum_t cd = {(unsigned char *)cert, (unsigned)clen};
    p->n = MAX_CHAIN;
    rc = gnutls_pcert_list_import_x509_raw(p->pcert, &p->n, &cd, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0 || p->n == 0) {
        p->n = 0;
        snprintf(err, errsize, "%s: not a PEM certificate (chain of at most %d): %s", cert_file,
                 MAX_CHAIN, gnutls_strerror(rc));
        goto fail;
    }
    gnutls_datum_t kd = {(unsigned char *)key, (unsigned)klen};
    if (gnutls_privkey_init(&p->key) < 0 ||
        (rc = gnutls_privkey_import_x509_raw(p->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        snprintf(err, errsize, "%s: not a PEM private key without a password", key_file);
        goto fail;
    }
    if (!key_matches(p)) {
        snprintf(err, errsize, "%s is not the key of the certificate in %s", key_file, cert_file);
        goto fail;
    }
    free(cert);
    wipe_free(key, klen);
    return p;
fail:
    free(cert);
    wipe_free(key, klen);
    pair_free(p);
    return NULL;
}

/* A trust list of the PEM CAs in text, or NULL with why. */
static gnutls_x509_trust_list_t load_trust(const char *text, size_t len, char *err, size_t errsize)
{
    gnutls_x509_trust_list_t list;
    if (gnutls_x509_trust_list_init(&list, 0) < 0) {
        snprintf(err, errsize, "GnuTLS: cannot make a trust list");
        return NULL;
    }
    gnutls_datum_t d = {(unsigned char *)text, (unsigned)len};
    int rc = gnutls_x509_trust_list_add_trust_mem(list, &d, NULL, GNUTLS_X509_FMT_PEM, 0, 0);
    if (rc <= 0) {
        snprintf(err, errsize, "no PEM CA certificate in it%s%s", rc < 0 ? ": " : "",
                 rc < 0 ? gnutls_strerror(rc) : "");
        gnutls_x509_trust_list_deinit(list, 1);
        return NULL;
    }
    return list;
}

static int same_stat(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* t->mu held. */
static void refresh(mw_tls *t)
{
    int64_t now = monotonic_ms();
    /* Pairs retired long enough ago that no handshake still uses them. */
    for (cert_pair **pp = &t->retired; *pp;) {
        if (now - (*pp)->retired_ms > RETIRED_KEEP_MS) {
            cert_pair *old = *pp;
            *pp = old->next;
            pair_free(old);
        } else
            pp = &(*pp)->next;
    }
    if (now - t->checked_ms < RECHECK_MS) return;
    t->checked_ms = now;
    struct stat cs, ks;
    if (stat(t->cert_file, &cs) < 0 || stat(t->key_file, &ks) < 0) return; /* mid-rotation */
    if (same_stat(&cs, &t->current->cert_st) && same_stat(&ks, &t->current->key_st)) return;
    char err[9000];
    cert_pair *fresh = load_pair(t->cert_file, t->key_file, err, sizeof(err));
    if (!fresh) {
        mw_log_once(MW_LOG_WARN, "tls", t->cert_file,
                    "TLS certificate not reloaded: %s; serving "
                    "the previous one",
                    err);
        return;
    }
    t->current->retired_ms = now;
    t->current->next = t->retired;
    t->retired = t->current;
    t->current = fresh;
    mw_log(MW_LOG_INFO, "tls", "TLS certificate %s re-read", t->cert_file);
}

static int retrieve_cert(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                         const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                         gnutls_pcert_st **pcert, unsigned int *pcert_length,
                         gnutls_privkey_t *pkey)
{
    (void)session;
    (void)req_ca_dn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    mw_tls *t = the_tls;
    if (!t) return -1;
    pthread_mutex_lock(&t->mu);
    refresh(t);
    *pcert = t->current->pcert;
    *pcert_length = t->current->n;
    *pkey = t->current->key;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

mw_tls *mw_tls_open(const char *cert_file, const char *key_file, const char *client_ca_file,
                    char *err, size_t errsize)
{
    if (!cert_file[0] || !key_file[0]) {
        snprintf(err, errsize, "--tls-cert-file and --tls-key-file go together%s",
                 client_ca_file[0] ? " (and --tls-client-ca-file needs both)" : "");
        return NULL;
    }
    if (the_tls) {
        snprintf(err, errsize, "one TLS server per process");
        return NULL;
    }
    /* GnuTLS was not started before main() (serve/http.c); it is now. */
    int rc = gnutls_global_init();
    if (rc < 0) {
        snprintf(err, errsize, "GnuTLS: %s", gnutls_strerror(rc));
        return NULL;
    }
    mw_tls *t = mw_xcalloc(1, sizeof(*t));
    snprintf(t->cert_file, sizeof(t->cert_file), "%s", cert_file);
    snprintf(t->key_file, sizeof(t->key_file), "%s", key_file);
    pthread_mutex_init(&t->mu, NULL);
    t->current = load_pair(cert_file, key_file, err, errsize);
    if (!t->current) goto fail;
    pthread_mutex_init(&t->ca_mu, NULL);
    if (client_ca_file[0]) {
        size_t len;
        snprintf(t->client_ca_file, sizeof(t->client_ca_file), "%s", client_ca_file);
        t->client_ca = read_pem(client_ca_file, &t->ca_st, &len, err, errsize);
        if (!t->client_ca) goto fail;
        char why[512];
        t->trust = load_trust(t->client_ca, len, why, sizeof(why));
        if (!t->trust) {
            snprintf(err, errsize, "%s: %s", client_ca_file, why);
            goto fail;
        }
        t->ca_checked_ms = monotonic_ms();
    }
    t->checked_ms = monotonic_ms();
    int i = 0;
    t->items[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)(intptr_t)0};
    /* A function pointer travels in the item's pointer slot. */
    gnutls_certificate_retrieve_function2 *fn = retrieve_cert;
    memcpy(&t->items[0].ptr_value, &fn, sizeof(fn));
    if (t->client_ca)
        t->items[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, t->client_ca};
    t->items[i] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    the_tls = t;
    return t;
fail:
    mw_tls_free(t);
    return NULL;
}

void mw_tls_free(mw_tls *t)
{
    if (!t) return;
    if (the_tls == t) the_tls = NULL;
    pair_free(t->current);
    while (t->retired) {
        cert_pair *n = t->retired->next;
        pair_free(t->retired);
        t->retired = n;
    }
    free(t->client_ca);
    if (t->trust) gnutls_x509_trust_list_deinit(t->trust, 1);
    pthread_mutex_destroy(&t->ca_mu);
    pthread_mutex_destroy(&t->mu);
    free(t);
    gnutls_global_deinit();
}

unsigned mw_tls_daemon_flags(const mw_tls *t)
{
    (void)t;
    return MHD_USE_TLS;
}

const void *mw_tls_daemon_items(const mw_tls *t)
{
    return t->items;
}

/* t->ca_mu held: the client CA file again when it changed. */
static void refresh_client_ca(mw_tls *t)
{
    int64_t now = monotonic_ms();
    if (now - t->ca_checked_ms < RECHECK_MS) return;
    t->ca_checked_ms = now;
    struct stat st;
    if (stat(t->client_ca_file, &st) < 0 || same_stat(&st, &t->ca_st)) return;
    char err[600], why[512];
    size_t len = 0;
    char *text = read_pem(t->client_ca_file, &st, &len, err, sizeof(err));
    gnutls_x509_trust_list_t fresh = text ? load_trust(text, len, why, sizeof(why)) : NULL;
    free(text);
    if (!fresh) {
        if (text) snprintf(err, sizeof(err), "%.200s: %.380s", t->client_ca_file, why);
        mw_log_once(MW_LOG_WARN, "tls", t->client_ca_file,
                    "client CA not reloaded: %s; verifying with the previous one", err);
        return;
    }
    gnutls_x509_trust_list_deinit(t->trust, 1);
    t->trust = fresh;
    t->ca_st = st;
    mw_log(MW_LOG_INFO, "tls", "client CA %s re-read", t->client_ca_file);
}

int mw_tls_peer_verified(mw_tls *t, struct MHD_Connection *conn)
{
    if (!t->client_ca) return 1;
    pthread_mutex_lock(&t->ca_mu);
    refresh_client_ca(t);
    pthread_mutex_unlock(&t->ca_mu);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (!ci || !ci->tls_session) return 0;
    gnutls_session_t session = (gnutls_session_t)ci->tls_session;
    unsigned n = 0;
    const gnutls_datum_t *der = gnutls_certificate_get_peers(session, &n);
    if (!der || n == 0) return 0;
    if (n > MAX_CHAIN) n = MAX_CHAIN;
    gnutls_x509_crt_t chain[MAX_CHAIN];
    unsigned imported = 0;
    for (; imported < n; imported++) {
        if (gnutls_x509_crt_init(&chain[imported]) < 0) break;
        if (gnutls_x509_crt_import(chain[imported], &der[imported], GNUTLS_X509_FMT_DER) < 0) {
            gnutls_x509_crt_deinit(chain[imported]);
            break;
        }
    }
    unsigned status = 1;
    int ok = 0;
    if (imported == n) {
        pthread_mutex_lock(&t->ca_mu);
        ok = gnutls_x509_trust_list_verify_crt(t->trust, chain, n, 0, &status, NULL) == 0 &&
             status == 0;
        pthread_mutex_unlock(&t->ca_mu);
    }
    for (unsigned i = 0; i < imported; i++)
        gnutls_x509_crt_deinit(chain[i]);
    return ok;
}
