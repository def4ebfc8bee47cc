#define _GNU_SOURCE 1
#include "snaphttp.h"

/* Plain prototypes: the names below are redefined to the pointers dlsym fills in. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* libcurl is opened with dlopen the first time a request is sent, not linked: it and the
 * ~25 libraries it needs (TLS, HTTP/2, IDN, LDAP, Kerberos...) took about 3.4 ms of every
 * process start, and a worker writing to a local store never sends a request. */
#define SNAP_CURL_SONAME "libcurl.so.4"
#define SNAP_CURL_SYMBOLS(X) \
    X(curl_global_init) X(curl_share_init) X(curl_share_setopt) X(curl_share_cleanup) \
    X(curl_easy_init) X(curl_easy_setopt) X(curl_easy_perform) X(curl_easy_getinfo) \
    X(curl_easy_cleanup) X(curl_easy_strerror) X(curl_slist_append) X(curl_slist_free_all)
#define SNAP_DECLARE(name) static __typeof__(name) *snap_dl_##name;
SNAP_CURL_SYMBOLS(SNAP_DECLARE)
#undef SNAP_DECLARE
#define curl_global_init snap_dl_curl_global_init
#define curl_share_init snap_dl_curl_share_init
#define curl_share_setopt snap_dl_curl_share_setopt
#define curl_share_cleanup snap_dl_curl_share_cleanup
#define curl_easy_init snap_dl_curl_easy_init
#define curl_easy_setopt snap_dl_curl_easy_setopt
#define curl_easy_perform snap_dl_curl_easy_perform
#define curl_easy_getinfo snap_dl_curl_easy_getinfo
#define curl_easy_cleanup snap_dl_curl_easy_cleanup
#define curl_easy_strerror snap_dl_curl_easy_strerror
#define curl_slist_append snap_dl_curl_slist_append
#define curl_slist_free_all snap_dl_curl_slist_free_all

/* Why libcurl could not be opened; empty once it is. */
static char load_error[512];
static int loaded = 0;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *handle = dlopen(SNAP_CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "cannot open %s: %s (install libcurl4)", SNAP_CURL_SONAME, why ? why : "unknown error");
        return;
    }
#define SNAP_LOOKUP(name) \
    if (!(snap_dl_##name = (__typeof__(snap_dl_##name)) dlsym(handle, #name))) { \
        snprintf(load_error, sizeof load_error, "%s has no symbol %s", SNAP_CURL_SONAME, #name); \
        return; \
    }
    SNAP_CURL_SYMBOLS(SNAP_LOOKUP)
#undef SNAP_LOOKUP
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(load_error, sizeof load_error, "%s could not be initialised", SNAP_CURL_SONAME);
        return;
    }
    loaded = 1;
}

/* Loads libcurl once; 0 when it cannot be used (load_error says why). */
static int ready(void) {
    pthread_once(&load_once, load);
    return loaded;
}

struct snap_http_client {
    CURLSH *share;
    long max_connections;
    pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
};

struct buffer {
    uint8_t *bytes;
    size_t length, capacity;
};

struct snap_http_transfer {
    atomic_int cancelled;
    long status;
    struct buffer body;
    struct buffer headers;
    int failed_alloc;
    /* The body cap of the transfer under way (0: none), and whether the answer went over it. */
    size_t max_body;
    int over_limit;
    /* The transfer under way (for the announced length, once the headers are in). */
    CURL *easy;
};

static void share_lock(CURL *handle, curl_lock_data data, curl_lock_access access, void *user) {
    (void)handle; (void)access;
    pthread_mutex_lock(&((snap_http_client *)user)->locks[data]);
}

static void share_unlock(CURL *handle, curl_lock_data data, void *user) {
    (void)handle;
    pthread_mutex_unlock(&((snap_http_client *)user)->locks[data]);
}

snap_http_client *snap_http_client_new(long max_connections) {
    snap_http_client *client = calloc(1, sizeof *client);
    if (!client) return NULL;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_init(&client->locks[i], NULL);
    client->max_connections = max_connections > 0 ? max_connections : 8;
    return client;
}

/* The client's share object, made with its first request (libcurl is loaded by then). */
static pthread_mutex_t share_mutex = PTHREAD_MUTEX_INITIALIZER;

static CURLSH *share_of(snap_http_client *client) {
    pthread_mutex_lock(&share_mutex);
    if (!client->share) {
        CURLSH *share = curl_share_init();
        if (share) {
            curl_share_setopt(share, CURLSHOPT_LOCKFUNC, share_lock);
            curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, share_unlock);
            curl_share_setopt(share, CURLSHOPT_USERDATA, client);
            curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
            curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
            curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
        }
        client->share = share;
    }
    pthread_mutex_unlock(&share_mutex);
    return client->share;
}

void snap_http_client_free(snap_http_client *client) {
    if (!client) return;
    if (client->share) curl_share_cleanup(client->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_destroy(&client->locks[i]);
    free(client);
}

snap_http_transfer *snap_http_transfer_new(void) { return calloc(1, sizeof(snap_http_transfer)); }

void snap_http_transfer_free(snap_http_transfer *transfer) {
    if (!transfer) return;
    free(transfer->body.bytes);
    free(transfer->headers.bytes);
    free(transfer);
}

void snap_http_transfer_cancel(snap_http_transfer *transfer) { atomic_store(&transfer->cancelled, 1); }

static int append(struct buffer *b, const void *bytes, size_t length) {
    if (b->length + length + 1 > b->capacity) {
        size_t capacity = b->capacity ? b->capacity : 4096;
        while (capacity < b->length + length + 1) capacity *= 2;
        uint8_t *grown = realloc(b->bytes, capacity);
        if (!grown) return 0;
        b->bytes = grown;
        b->capacity = capacity;
    }
    memcpy(b->bytes + b->length, bytes, length);
    b->length += length;
    b->bytes[b->length] = 0;
    return 1;
}

/* Makes room for `length` bytes (and the terminating 0) at once. */
static int reserve(struct buffer *b, size_t length) {
    if (length + 1 <= b->capacity) return 1;
    uint8_t *grown = realloc(b->bytes, length + 1);
    if (!grown) return 0;
    b->bytes = grown;
    b->capacity = length + 1;
    return 1;
}

static size_t on_body(char *bytes, size_t size, size_t count, void *user) {
    snap_http_transfer *t = user;
    size_t length = size * count;
    if (t->body.length == 0 && t->easy) {
        /* The first bytes: every header is in. An answer announced longer than the cap is
         * not read at all; one that fits gets its buffer once, not by doubling. */
        curl_off_t announced = -1;
        if (curl_easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced) != CURLE_OK) announced = -1;
        if (t->max_body > 0 && announced >= 0 && (uint64_t)announced > (uint64_t)t->max_body) { t->over_limit = 1; return 0; }
        if (announced > 0 && (t->max_body == 0 || (uint64_t)announced <= (uint64_t)t->max_body)
            && !reserve(&t->body, (size_t)announced)) { t->failed_alloc = 1; return 0; }
    }
    /* Longer than the cap without saying so (chunked, or more than announced): stop reading. */
    if (t->max_body > 0 && (length > t->max_body || t->body.length > t->max_body - length)) {
        t->over_limit = 1;
        return 0;
    }
    if (!append(&t->body, bytes, length)) { t->failed_alloc = 1; return 0; }
    return length;
}

static size_t on_header(char *bytes, size_t size, size_t count, void *user) {
    snap_http_transfer *t = user;
    size_t length = size * count;
    /* A new status line (after 100 Continue, say) starts the answer's headers again. */
    if (length >= 5 && memcmp(bytes, "HTTP/", 5) == 0) t->headers.length = 0;
    if (!append(&t->headers, bytes, length)) { t->failed_alloc = 1; return 0; }
    return length;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
    return atomic_load(&((snap_http_transfer *)user)->cancelled) ? 1 : 0;
}

static int kind(CURLcode code) {
    switch (code) {
    case CURLE_OK: return SNAP_HTTP_OK;
    case CURLE_OPERATION_TIMEDOUT: return SNAP_HTTP_TIMED_OUT;
    case CURLE_COULDNT_CONNECT: return SNAP_HTTP_CONNECTION_REFUSED;
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY: return SNAP_HTTP_HOST_NOT_FOUND;
    case CURLE_SEND_ERROR: case CURLE_RECV_ERROR: case CURLE_GOT_NOTHING: case CURLE_PARTIAL_FILE:
    case CURLE_WEIRD_SERVER_REPLY: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
        return SNAP_HTTP_CONNECTION_LOST;
    case CURLE_ABORTED_BY_CALLBACK: return SNAP_HTTP_CANCELLED;
    case CURLE_SSL_CONNECT_ERROR: return SNAP_HTTP_TLS;
    case CURLE_PEER_FAILED_VERIFICATION: case CURLE_SSL_CERTPROBLEM: case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CIPHER: case CURLE_SSL_ISSUER_ERROR: case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        return SNAP_HTTP_CERTIFICATE;
    case CURLE_URL_MALFORMAT: case CURLE_UNSUPPORTED_PROTOCOL: return SNAP_HTTP_BAD_URL;
    default: return SNAP_HTTP_OTHER;
    }
}

int snap_http_perform(snap_http_client *client, snap_http_transfer *t, const char *method, const char *url,
                      const char *const *headers, size_t header_count, const uint8_t *body, size_t body_length,
                      int has_body, long idle_timeout_ms, long total_timeout_ms, size_t max_body, int *curl_code) {
    *curl_code = CURLE_OK;
    t->status = 0;
    t->body.length = 0;
    t->headers.length = 0;
    t->max_body = max_body;
    t->over_limit = 0;
    t->easy = NULL;
    if (atomic_load(&t->cancelled)) { *curl_code = CURLE_ABORTED_BY_CALLBACK; return SNAP_HTTP_CANCELLED; }
    if (!ready()) { *curl_code = SNAP_HTTP_NOT_LOADED; return SNAP_HTTP_OTHER; }
    CURLSH *share = share_of(client);
    if (!share) { *curl_code = CURLE_OUT_OF_MEMORY; return SNAP_HTTP_OTHER; }
    CURL *easy = curl_easy_init();
    if (!easy) { *curl_code = CURLE_OUT_OF_MEMORY; return SNAP_HTTP_OTHER; }
    t->easy = easy;

    struct curl_slist *list = NULL;
    int has_content_type = 0;
    for (size_t i = 0; i < header_count; i++) {
        if (strncasecmp(headers[i], "content-type:", 13) == 0) has_content_type = 1;
        list = curl_slist_append(list, headers[i]);
    }
    /* No "Expect: 100-continue" round trip, and no form content type curl would add. */
    list = curl_slist_append(list, "Expect:");
    if (has_body && !has_content_type) list = curl_slist_append(list, "Content-Type:");

    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_SHARE, share);
    curl_easy_setopt(easy, CURLOPT_MAXCONNECTS, client->max_connections);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, t);
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    if (idle_timeout_ms > 0) {
        curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, idle_timeout_ms);
        curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, (idle_timeout_ms + 999) / 1000);
    }
    if (total_timeout_ms > 0) curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, total_timeout_ms);

    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    } else if (has_body) {
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_length);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body_length > 0 ? (const char *)body : "");
        if (strcmp(method, "POST") != 0) curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
    }

    CURLcode code = curl_easy_perform(easy);
    if (code == CURLE_WRITE_ERROR && t->over_limit) {
        /* Stopped on purpose: an answer (status, headers) without its body. The connection
         * is closed, not drained: the rest is never read. */
        code = CURLE_OK;
        t->body.length = 0;
    }
    if (code == CURLE_OK) {
        long status = 0;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        t->status = status;
    }
    if (code == CURLE_WRITE_ERROR && t->failed_alloc) code = CURLE_OUT_OF_MEMORY;
    t->easy = NULL;
    curl_easy_cleanup(easy);
    curl_slist_free_all(list);
    *curl_code = (int)code;
    return kind(code);
}

long snap_http_status(const snap_http_transfer *t) { return t->status; }

int snap_http_over_limit(const snap_http_transfer *t) { return t->over_limit; }

const uint8_t *snap_http_body(const snap_http_transfer *t, size_t *length) {
    *length = t->body.length;
    return t->body.bytes;
}

uint8_t *snap_http_take_body(snap_http_transfer *t, size_t *length) {
    uint8_t *bytes = t->body.bytes;
    *length = t->body.length;
    t->body.bytes = NULL;
    t->body.length = 0;
    t->body.capacity = 0;
    return bytes;
}

const char *snap_http_headers(const snap_http_transfer *t, size_t *length) {
    *length = t->headers.length;
    return (const char *)t->headers.bytes;
}

const char *snap_http_error_text(int curl_code) {
    if (curl_code == SNAP_HTTP_NOT_LOADED || !ready()) return load_error;
    return curl_easy_strerror((CURLcode)curl_code);
}
