/* OpenSSL's libcrypto: SHA-256 (content addresses), HMAC-SHA256 and MD5 (object-storage
 * requests), RS256 (the JWTs that Google's token endpoint exchanges for access tokens). */
/* SHA256_Init and friends are deprecated in OpenSSL 3 (see snap_sha256). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "systemshim.h"

#include <limits.h>
#include <stdlib.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

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
 * input is hashed for its manifest's source digest). The digest is the same.
 * The low-level SHA256_* calls, not EVP_Digest: the first EVP call of a process
 * initialises OpenSSL's providers, reads openssl.cnf and builds its name maps,
 * 1.3-1.8 ms of CPU here that every worker start paid for a content hash (issue
 * 27). They are deprecated in OpenSSL 3 in favour of EVP, but kept, and the same
 * assembly does the work. */
void
snap_sha256(const void *data, size_t len, unsigned char out[32])
{
	SHA256_CTX ctx;
	/* These fail only on a NULL argument. */
	if (SHA256_Init(&ctx) != 1 || SHA256_Update(&ctx, data, len) != 1 || SHA256_Final(out, &ctx) != 1)
		abort();
}

/* An encrypted PEM key would make OpenSSL prompt on the terminal for a passphrase:
 * answer "none" instead, so that such a key simply fails to load. */
static int
snap_no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf; (void)size; (void)rwflag; (void)u;
	return 0;
}

/* Google's OAuth token endpoint takes a JWT signed RS256 with a service account's
 * key; this is the one call that touches the key. The key lives only in OpenSSL's
 * structures for the length of the call, and OpenSSL's error queue is cleared so
 * that nothing about the key is left behind for a later caller to print. */
int
snap_rs256_sign(const char *pem, size_t pem_len, const void *data, size_t len, unsigned char *sig, size_t *sig_len)
{
	int result = -2;
	size_t needed = 0;
	EVP_MD_CTX *ctx = NULL;
	EVP_PKEY *key = NULL;
	BIO *bio;

	if (pem_len > INT_MAX || (bio = BIO_new_mem_buf(pem, (int)pem_len)) == NULL)
		return -1;
	key = PEM_read_bio_PrivateKey(bio, NULL, snap_no_passphrase, NULL);
	BIO_free(bio);
	if (key == NULL || EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA) {
		result = -1;
		goto done;
	}
	if ((ctx = EVP_MD_CTX_new()) == NULL)
		goto done;
	/* RSA's default padding for signatures is PKCS#1 v1.5, which RS256 is. */
	if (EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) != 1)
		goto done;
	if (EVP_DigestSign(ctx, NULL, &needed, data, len) != 1 || needed > *sig_len)
		goto done;
	if (EVP_DigestSign(ctx, sig, sig_len, data, len) != 1)
		goto done;
	result = 0;
done:
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(key);
	ERR_clear_error();
	return result;
}
