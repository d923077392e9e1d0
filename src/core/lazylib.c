/* lazylib.c - libcurl, snappy, protobuf-c, libcrypto, ISA-L and libyaml,
 * loaded on first use.
 *
 * Only optional features need them: carbon-intensity URLs, notifications,
 * the Kubernetes watch and remote write (libcurl), the remote-write wire
 * format (snappy, protobuf-c), the kubelet's pod resources (protobuf-c),
 * hashmod relabelling (libcrypto's MD5), fast checksums for store queries
 * (ISA-L, src/store/crc.c), config files and kubeconfigs (libyaml). Linked normally, they and what
 * they pull in (OpenSSL, Kerberos, libstdc++, ...) add ~4 MiB of resident pages to every agent,
 * including the many that use none of it; even libyaml, read once at start
 * if at all, costs 80 KB (a library's start-up code faults in 64 KB of its
 * text).
 * So the agent links none of them: this file defines the few functions we
 * call, with the libraries' own prototypes (from their headers), and
 * forwards each call to the real library, dlopen'ed the first time one is
 * needed. A missing library makes those calls fail the way the library
 * reports failure (NULL handle, error code), logged once; the rest of the
 * agent is unaffected. */
#include "log.h"

/* Plain prototypes: curl.h otherwise wraps setopt/getinfo in type-checking
 * macros, which would rename the functions defined here. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <dlfcn.h>
#include <isa-l/crc.h>
#include <openssl/evp.h>
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <snappy-c.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <yaml.h>
#include <zlib.h>

typedef struct lazy {
    const char *what;           /* for the log line */
    const char *const *sonames; /* tried in order */
    pthread_once_t once;
    void *handle;
} lazy;

static void load(lazy *l)
{
    const char *err = "not found";
    for (const char *const *n = l->sonames; *n; n++) {
        l->handle = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
        if (l->handle) return;
        err = dlerror();
    }
    mw_log(MW_LOG_WARN, "lazylib", "cannot load %s (%s): %s", l->sonames[0], err, l->what);
}

#define LIB(var, what, ...)                                                                        \
    static const char *const var##_names[] = {__VA_ARGS__, NULL};                                  \
    static lazy var = {what, var##_names, PTHREAD_ONCE_INIT, NULL};                                \
    static void var##_load(void)                                                                   \
    {                                                                                              \
        load(&var);                                                                                \
    }

LIB(curl_lib, "HTTP features (carbon URL, notifications, Kubernetes, remote write) are off",
    "libcurl.so.4", "libcurl-gnutls.so.4")
LIB(snappy_lib, "remote write (send and receive) is off", "libsnappy.so.1")
LIB(protobuf_lib, "remote write (send and receive) and the kubelet's pod resources are off",
    "libprotobuf-c.so.1")
LIB(crypto_lib, "hashmod relabelling is off", "libcrypto.so.3", "libcrypto.so.1.1")
LIB(isal_lib, "store queries check chunks with zlib's crc32 instead (slower)", "libisal.so.2")
LIB(yaml_lib, "config files, config sections and kubeconfigs cannot be read", "libyaml-0.so.2")

/* Resolve SYM of library L into a static function pointer of type T. */
#define RESOLVE(L, T, sym)                                                                         \
    static void *sym_;                                                                             \
    pthread_once(&L.once, L##_load);                                                               \
    void *p_ = __atomic_load_n(&sym_, __ATOMIC_ACQUIRE);                                           \
    if (!p_ && L.handle) {                                                                         \
        /* Threads racing here all store the same address. */                                      \
        p_ = dlsym(L.handle, #sym);                                                                \
        __atomic_store_n(&sym_, p_, __ATOMIC_RELEASE);                                             \
    }                                                                                              \
    __typeof__(T) fn_;                                                                             \
    __builtin_memcpy(&fn_, &p_, sizeof(p_));

/* ---- libcurl ---- */

CURLcode curl_global_init(long flags)
{
    RESOLVE(curl_lib, CURLcode(*)(long), curl_global_init)
    return fn_ ? fn_(flags) : CURLE_FAILED_INIT;
}

CURL *curl_easy_init(void)
{
    RESOLVE(curl_lib, CURL * (*)(void), curl_easy_init)
    return fn_ ? fn_() : NULL;
}

CURLcode curl_easy_setopt(CURL *curl, CURLoption option, ...)
{
    RESOLVE(curl_lib, CURLcode(*)(CURL *, CURLoption, ...), curl_easy_setopt)
    if (!fn_) return CURLE_FAILED_INIT;
    /* The option number says the type of its one argument (curl.h's
     * CURLOPTTYPE_* ranges): forward it with that type. */
    va_list ap;
    va_start(ap, option);
    CURLcode rc;
    if (option < CURLOPTTYPE_OBJECTPOINT)
        rc = fn_(curl, option, va_arg(ap, long));
    else if (option < CURLOPTTYPE_OFF_T)
        rc = fn_(curl, option, va_arg(ap, void *)); /* object and function pointers */
    else if (option < CURLOPTTYPE_BLOB)
        rc = fn_(curl, option, va_arg(ap, curl_off_t));
    else
        rc = fn_(curl, option, va_arg(ap, void *));
    va_end(ap);
    return rc;
}

CURLcode curl_easy_perform(CURL *curl)
{
    RESOLVE(curl_lib, CURLcode(*)(CURL *), curl_easy_perform)
    return fn_ ? fn_(curl) : CURLE_FAILED_INIT;
}

void curl_easy_cleanup(CURL *curl)
{
    RESOLVE(curl_lib, void (*)(CURL *), curl_easy_cleanup)
    if (fn_) fn_(curl);
}

void curl_easy_reset(CURL *curl)
{
    RESOLVE(curl_lib, void (*)(CURL *), curl_easy_reset)
    if (fn_) fn_(curl);
}

CURLcode curl_easy_getinfo(CURL *curl, CURLINFO info, ...)
{
    RESOLVE(curl_lib, CURLcode(*)(CURL *, CURLINFO, ...), curl_easy_getinfo)
    if (!fn_) return CURLE_FAILED_INIT;
    va_list ap;
    va_start(ap, info);
    CURLcode rc = fn_(curl, info, va_arg(ap, void *)); /* always a pointer to the result */
    va_end(ap);
    return rc;
}

const char *curl_easy_strerror(CURLcode code)
{
    RESOLVE(curl_lib, const char *(*)(CURLcode), curl_easy_strerror)
    return fn_ ? fn_(code) : "libcurl is not available";
}

struct curl_slist *curl_slist_append(struct curl_slist *list, const char *s)
{
    RESOLVE(curl_lib, struct curl_slist * (*)(struct curl_slist *, const char *), curl_slist_append)
    return fn_ ? fn_(list, s) : NULL;
}

void curl_slist_free_all(struct curl_slist *list)
{
    RESOLVE(curl_lib, void (*)(struct curl_slist *), curl_slist_free_all)
    if (fn_) fn_(list);
}

/* ---- snappy ---- */

snappy_status snappy_compress(const char *input, size_t input_length, char *compressed,
                              size_t *compressed_length)
{
    RESOLVE(snappy_lib, snappy_status(*)(const char *, size_t, char *, size_t *), snappy_compress)
    return fn_ ? fn_(input, input_length, compressed, compressed_length) : SNAPPY_INVALID_INPUT;
}

snappy_status snappy_uncompress(const char *compressed, size_t compressed_length,
                                char *uncompressed, size_t *uncompressed_length)
{
    RESOLVE(snappy_lib, snappy_status(*)(const char *, size_t, char *, size_t *), snappy_uncompress)
    return fn_ ? fn_(compressed, compressed_length, uncompressed, uncompressed_length)
               : SNAPPY_INVALID_INPUT;
}

size_t snappy_max_compressed_length(size_t source_length)
{
    RESOLVE(snappy_lib, size_t(*)(size_t), snappy_max_compressed_length)
    /* Without the library nothing will be compressed; keep callers' sizing sane. */
    return fn_ ? fn_(source_length) : 32 + source_length + source_length / 6;
}

snappy_status snappy_uncompressed_length(const char *compressed, size_t compressed_length,
                                         size_t *result)
{
    RESOLVE(snappy_lib, snappy_status(*)(const char *, size_t, size_t *),
            snappy_uncompressed_length)
    return fn_ ? fn_(compressed, compressed_length, result) : SNAPPY_INVALID_INPUT;
}

/* ---- protobuf-c (remote write, pod resources) ---- */

/* The messages protoc-c generates (in the build folder) point their string
 * fields at this one by default, and protobuf-c frees a string only when
 * it is not its field's default: the library's own copy is never compared
 * with ours. */
const char protobuf_c_empty_string[] = "";

size_t protobuf_c_message_get_packed_size(const ProtobufCMessage *message)
{
    RESOLVE(protobuf_lib, size_t(*)(const ProtobufCMessage *), protobuf_c_message_get_packed_size)
    return fn_ ? fn_(message) : 0;
}

size_t protobuf_c_message_pack(const ProtobufCMessage *message, uint8_t *out)
{
    RESOLVE(protobuf_lib, size_t(*)(const ProtobufCMessage *, uint8_t *), protobuf_c_message_pack)
    return fn_ ? fn_(message, out) : 0;
}

size_t protobuf_c_message_pack_to_buffer(const ProtobufCMessage *message, ProtobufCBuffer *buffer)
{
    RESOLVE(protobuf_lib, size_t(*)(const ProtobufCMessage *, ProtobufCBuffer *),
            protobuf_c_message_pack_to_buffer)
    return fn_ ? fn_(message, buffer) : 0;
}

ProtobufCMessage *protobuf_c_message_unpack(const ProtobufCMessageDescriptor *descriptor,
                                            ProtobufCAllocator *allocator, size_t len,
                                            const uint8_t *data)
{
    RESOLVE(protobuf_lib,
            ProtobufCMessage * (*)(const ProtobufCMessageDescriptor *, ProtobufCAllocator *, size_t,
                                   const uint8_t *),
            protobuf_c_message_unpack)
    /* NULL is how protobuf-c reports a message it cannot decode. */
    return fn_ ? fn_(descriptor, allocator, len, data) : NULL;
}

void protobuf_c_message_free_unpacked(ProtobufCMessage *message, ProtobufCAllocator *allocator)
{
    RESOLVE(protobuf_lib, void (*)(ProtobufCMessage *, ProtobufCAllocator *),
            protobuf_c_message_free_unpacked)
    if (fn_) fn_(message, allocator);
}

/* ---- libcrypto (MD5 for hashmod) ---- */

const EVP_MD *EVP_md5(void)
{
    RESOLVE(crypto_lib, const EVP_MD *(*)(void), EVP_md5)
    return fn_ ? fn_() : NULL;
}

int EVP_Digest(const void *data, size_t count, unsigned char *md, unsigned int *size,
               const EVP_MD *type, ENGINE *impl)
{
    RESOLVE(
        crypto_lib,
        int (*)(const void *, size_t, unsigned char *, unsigned int *, const EVP_MD *, ENGINE *),
        EVP_Digest)
    return fn_ && type ? fn_(data, count, md, size, type, impl) : 0;
}

/* ---- ISA-L (CRC-32 of store chunks in queries) ---- */

uint32_t crc32_gzip_refl(uint32_t init_crc, const unsigned char *buf, uint64_t len)
{
    RESOLVE(isal_lib, uint32_t(*)(uint32_t, const unsigned char *, uint64_t), crc32_gzip_refl)
    /* Without it, the same CRC as zlib computes it. */
    return fn_ ? fn_(init_crc, buf, len) : (uint32_t)crc32_z(init_crc, buf, (z_size_t)len);
}

/* ---- libyaml (config files, kubeconfig) ---- */

int yaml_parser_initialize(yaml_parser_t *parser)
{
    RESOLVE(yaml_lib, int (*)(yaml_parser_t *), yaml_parser_initialize)
    if (fn_) return fn_(parser);
    /* As libyaml fails: a zeroed parser, 0 (callers report it). */
    memset(parser, 0, sizeof(*parser));
    return 0;
}

void yaml_parser_set_input_string(yaml_parser_t *parser, const unsigned char *input, size_t size)
{
    RESOLVE(yaml_lib, void (*)(yaml_parser_t *, const unsigned char *, size_t),
            yaml_parser_set_input_string)
    if (fn_) fn_(parser, input, size);
}

int yaml_parser_load(yaml_parser_t *parser, yaml_document_t *document)
{
    RESOLVE(yaml_lib, int (*)(yaml_parser_t *, yaml_document_t *), yaml_parser_load)
    return fn_ ? fn_(parser, document) : 0;
}

void yaml_parser_delete(yaml_parser_t *parser)
{
    RESOLVE(yaml_lib, void (*)(yaml_parser_t *), yaml_parser_delete)
    if (fn_) fn_(parser);
}

void yaml_document_delete(yaml_document_t *document)
{
    RESOLVE(yaml_lib, void (*)(yaml_document_t *), yaml_document_delete)
    if (fn_) fn_(document);
}

yaml_node_t *yaml_document_get_node(yaml_document_t *document, int index)
{
    RESOLVE(yaml_lib, yaml_node_t * (*)(yaml_document_t *, int), yaml_document_get_node)
    return fn_ ? fn_(document, index) : NULL;
}

yaml_node_t *yaml_document_get_root_node(yaml_document_t *document)
{
    RESOLVE(yaml_lib, yaml_node_t * (*)(yaml_document_t *), yaml_document_get_root_node)
    return fn_ ? fn_(document) : NULL;
}
