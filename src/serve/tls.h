/* tls.h - the server's TLS through libmicrohttpd and GnuTLS: a certificate
 * and key re-read when they change, and an optional client CA for mutual
 * TLS, also re-read when it changes (docs/security.md). One TLS server per process. */
#ifndef MW_TLS_H
#define MW_TLS_H

#include <stddef.h>

struct MHD_Connection;
typedef struct mw_tls mw_tls;

/* cert_file and key_file are PEM files (both needed); client_ca_file, when
 * not empty, the PEM CAs that sign client certificates. NULL with a message
 * naming the file when one cannot be read or the key does not match. */
mw_tls *mw_tls_open(const char *cert_file, const char *key_file, const char *client_ca_file,
                    char *err, size_t errsize);
void mw_tls_free(mw_tls *t);

/* For mw_http_set_daemon_extra. */
unsigned mw_tls_daemon_flags(const mw_tls *t);
const void *mw_tls_daemon_items(const mw_tls *t);

/* 1 when no client CA is set, or the connection's client presented a
 * certificate that the client CA verifies (the file re-read when it
 * changed); 0 otherwise. */
int mw_tls_peer_verified(mw_tls *t, struct MHD_Connection *conn);

#endif
