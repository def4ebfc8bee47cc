#ifndef SNAPDIGEST_H
#define SNAPDIGEST_H

#include <stddef.h>

/* Message digests for request signing (AWS Signature Version 4) and the
 * checksum headers of object-storage writes, from OpenSSL's libcrypto. */

/* HMAC-SHA256 of data under key. */
void snap_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, unsigned char out[32]);

/* MD5 of data (only for Content-MD5 headers, never for addressing). */
void snap_md5(const void *data, size_t len, unsigned char out[16]);

#endif
