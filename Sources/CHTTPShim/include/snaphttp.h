#ifndef SNAPHTTP_H
#define SNAPHTTP_H

#include <stddef.h>
#include <stdint.h>

/* HTTP over libcurl's easy interface: one blocking transfer per call, on the calling
 * thread, waiting in poll() (no busy loop while a long poll is held open). Transfers
 * share connections, DNS answers and TLS sessions through one share object. */

/* What a failed transfer met, for the Swift side's retry decisions. */
enum {
    SNAP_HTTP_OK = 0,
    SNAP_HTTP_TIMED_OUT = 1,
    SNAP_HTTP_CONNECTION_REFUSED = 2,
    SNAP_HTTP_HOST_NOT_FOUND = 3,
    SNAP_HTTP_CONNECTION_LOST = 4,
    SNAP_HTTP_CANCELLED = 5,
    SNAP_HTTP_TLS = 6,
    SNAP_HTTP_BAD_URL = 7,
    SNAP_HTTP_OTHER = 8,
    SNAP_HTTP_CERTIFICATE = 9,
};

typedef struct snap_http_client snap_http_client;
typedef struct snap_http_transfer snap_http_transfer;

/* A client: the shared connection cache. max_connections: kept open in all. NULL on failure. */
snap_http_client *snap_http_client_new(long max_connections);
void snap_http_client_free(snap_http_client *client);

/* One transfer's state: the cancel flag and the answer. */
snap_http_transfer *snap_http_transfer_new(void);
void snap_http_transfer_free(snap_http_transfer *transfer);
/* From any thread, before or during the transfer: it ends as SNAP_HTTP_CANCELLED. */
void snap_http_transfer_cancel(snap_http_transfer *transfer);

/* Performs the request. headers: "Name: value" strings. has_body: send body (body_length
 * bytes, possibly 0). idle_timeout_ms: fails when no byte moves for that long;
 * total_timeout_ms: 0 for none. max_body: the most bytes of the answer's body kept (0: no
 * cap); an answer whose Content-Length is larger is not read, one that runs past it is cut
 * off there: either way the transfer ends SNAP_HTTP_OK with its status and headers, an empty
 * body and snap_http_over_limit() true. Returns SNAP_HTTP_OK or a failure kind; *curl_code
 * gets libcurl's own code. The answer stays in the transfer until it is freed. */
int snap_http_perform(snap_http_client *client, snap_http_transfer *transfer, const char *method, const char *url,
                      const char *const *headers, size_t header_count, const uint8_t *body, size_t body_length,
                      int has_body, long idle_timeout_ms, long total_timeout_ms, size_t max_body, int *curl_code);

long snap_http_status(const snap_http_transfer *transfer);
/* 1 when the answer's body was longer than max_body (and was not kept). */
int snap_http_over_limit(const snap_http_transfer *transfer);
const uint8_t *snap_http_body(const snap_http_transfer *transfer, size_t *length);
/* The body's buffer, handed over (free() it; NULL when there is none): the transfer keeps no copy. */
uint8_t *snap_http_take_body(snap_http_transfer *transfer, size_t *length);
/* The final answer's header block ("Name: value\r\n" lines, status line first). */
const char *snap_http_headers(const snap_http_transfer *transfer, size_t *length);
/* *curl_code when libcurl itself could not be opened (it is loaded with the first request). */
#define SNAP_HTTP_NOT_LOADED (-1)

/* libcurl's words for a failure (never the URL), or why libcurl could not be opened. */
const char *snap_http_error_text(int curl_code);

#endif
