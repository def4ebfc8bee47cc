/* zlib: CRC-32 and deflate for the palette PNGs. */
#define _GNU_SOURCE 1
#include "snapshim.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

unsigned long snap_crc32(unsigned long crc, const void *data, size_t len)
{ return crc32(crc, data, (uInt) len); }

size_t snap_deflate_bound(size_t in_len) { return compressBound((uLong) in_len); }

int
snap_deflate(const void *in, size_t in_len, int level, int strategy, void *out, size_t *out_len)
{
	z_stream s;
	memset(&s, 0, sizeof s);
	/* The smallest window that still reaches back over the whole input (zlib keeps
	 * 262 bytes of lookahead), so the matches found are the same as with 32 KiB;
	 * setting up the default 32 KiB window and 128 KiB hash for a 5 KB palette PNG
	 * cost more than compressing it. */
	int bits = 9;
	while (bits < 15 && ((size_t) 1 << bits) < in_len + 262) bits++;
	if (deflateInit2(&s, level, Z_DEFLATED, bits, 8, strategy) != Z_OK)
		return -1;
	s.next_in = (Bytef *) in;
	s.avail_in = (uInt) in_len;
	s.next_out = out;
	s.avail_out = (uInt) *out_len;
	int r = deflate(&s, Z_FINISH);
	*out_len = s.total_out;
	deflateEnd(&s);
	return r == Z_STREAM_END ? 0 : -1;
}

const char *snap_zlib_version(void) { return zlibVersion(); }
