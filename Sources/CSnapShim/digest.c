/* OpenSSL's libcrypto: SHA-256 (content addresses), HMAC-SHA256 and MD5 (object-storage requests). */
#include "snapshim.h"

#include <stdlib.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

void
snap_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, unsigned char out[32])
{
	unsigned int out_len = 32;
	/* HMAC() fails only when OpenSSL cannot allocate; a wrong signature would
	 * merely be refused, but a silent one is worse than stopping. */
	if (HMAC(EVP_sha256(), key, (int)key_len, data, len, out, &out_len) == NULL || out_len != 32)
		abort();
}

void
snap_md5(const void *data, size_t len, unsigned char out[16])
{
	unsigned int out_len = 16;
	if (EVP_Digest(data, len, out, &out_len, EVP_md5(), NULL) != 1)
		abort();
}

/* OpenSSL's SHA-256 uses the CPU's SHA extensions where it has them: about ten
 * times GLib's g_checksum here, which mattered for 2-3 MB camera originals (every
 * input is hashed for its manifest's source digest). The digest is the same. */
void
snap_sha256(const void *data, size_t len, unsigned char out[32])
{
	unsigned int out_len = 32;
	/* Only an allocation failure inside OpenSSL can fail this: a wrong content
	 * address would be worse than stopping (a worker that dies is retried). */
	if (EVP_Digest(data, len, out, &out_len, EVP_sha256(), NULL) != 1)
		abort();
}
