/* A faster Huffman decoder for libjpeg's baseline scans: libjpeg keeps doing the
 * rest (markers, IDCT, upsampling, colour), and its coefficients come out the same.
 *
 * libjpeg-turbo decodes one Huffman symbol per table look-up and then reads the
 * coefficient's magnitude bits in a second step; with restart markers it always
 * takes its slower, bit-checked path. Here one look-up of the next 10 bits gives
 * up to two whole coefficients (run, value) and the end of the block, the DC
 * look-up its value too, the bit buffer is topped up with 8 bytes before every
 * look-up, without a test, as far as the next 0xFF byte (found ahead with
 * memchr), and restart markers cost nothing on the way. On 1080×1440
 * snaps the entropy decoding takes about a quarter less CPU than libjpeg-turbo 2.1's.
 *
 * The coefficients written are libjpeg's: same table semantics (a prefix code
 * decodes one way), same natural-order table with its guard entries for a run
 * past the block's end, same DC arithmetic. Everything libjpeg would warn about
 * or recover from (a bad code, bits wanted past a marker, a restart marker out
 * of place, bytes between the data and a restart marker, the end of the buffer
 * before a marker) is not decoded here: the call returns SNAP_ENTROPY_DEFER and
 * the caller decodes the whole image again with libjpeg's own decoder, so its
 * warnings and its output decide such files exactly as before. */
#define _GNU_SOURCE 1
#include "jpeg_entropy.h"

#include <string.h>

#define AC_BITS 10
#define DC_BITS 9

/* DC look-up entries (9 bits): the bits to drop in bits 0-4; with KIND_PART
 * only the code is dropped and the magnitude's size is in bits 8-11, otherwise
 * the value is in bits 16-31; KIND_PART with length 0: a longer code.
 *
 * AC look-up entries (10 bits) decode up to two coefficients and the end of the
 * block at once: bits 0-4 the bits to drop, 5-6 the kind. A KIND_RUN entry has
 * the first coefficient's advance (run + 1) in bits 8-12, the second's in 13-17
 * (0 if there is none), the end of block in bit 18, the sum of the advances in
 * 20-25, the values in bits 32-47 and 48-63 (the first repeated when there is no
 * second). An end of block alone is a KIND_RUN entry too, with NO_COEFFICIENT (bit
 * 19: its stores go to a scratch block), so that the decoding loop has one way
 * out of a block. KIND_SYMBOL is a code whose magnitude bits do not fit (its
 * symbol in bits 8-15); length 0 a code longer than 10 bits. Those two have a
 * span of 63 (NOT_A_RUN), so that one test, the span against the block's end,
 * sends every entry that is not a run the slow way. */
enum { KIND_RUN = 0, KIND_SYMBOL = 2 << 5, KIND_PART = 3 << 5, KIND_MASK = 3 << 5 };
#define END_OF_BLOCK (1u << 18)
/* The span of an entry that is not a KIND_RUN: it never passes the fast test. */
#define NOT_A_RUN ((uint64_t) 63 << 20)
#define NO_COEFFICIENT (1u << 19)

static inline int
snap_extend(unsigned int v, int s)
{
	/* HUFF_EXTEND: a magnitude below 2^(s-1) is negative. */
	return v < (1u << (s - 1)) ? (int) v + (int) ((~0u << s) + 1) : (int) v;
}

/* The symbol of the code at the top of the `width` bits of `bits`, from the
 * short codes of `t`; its length in *length (0: none fits). */
static int
snap_short_code(const struct snap_huff *t, unsigned int bits, int width, int *length)
{
	for (int l = 1; l <= width; l++) {
		int code = (int) (bits >> (width - l));
		if (code <= t->maxcode[l]) {
			*length = l;
			return t->huffval[(code + t->valoffset[l]) & 0xFF];
		}
	}
	*length = 0;
	return -1;
}

/* Every code of `h` up to `width` bits, as a `width`-bit look-up of
 * length | symbol << 8 (0 where a longer code starts): each code fills the
 * entries it is a prefix of. */
static void
snap_short_codes(const JHUFF_TBL *h, int width, uint16_t *single)
{
	memset(single, 0, sizeof(uint16_t) << width);
	unsigned int code = 0;
	int p = 0;
	for (int l = 1; l <= width; l++, code <<= 1)
		for (int n = h->bits[l]; n > 0; n--, code++, p++)
			for (unsigned int i = code << (width - l), last = (code + 1) << (width - l); i < last; i++)
				single[i] = (uint16_t) (l | h->huffval[p] << 8);
}

/* The canonical code of `h` (Figures C.1 and F.15 of the standard, as libjpeg
 * derives it), then the look-up tables. Returns -1 when the table is not one
 * libjpeg accepted. */
static int
snap_entropy_table(const JHUFF_TBL *h, int dc, struct snap_huff *t)
{
	if (!h)
		return -1;
	int p = 0;
	unsigned int code = 0;
	for (int l = 1; l <= 16; l++) {
		int n = h->bits[l];
		if (p + n > 256)
			return -1;
		if (n) {
			t->valoffset[l] = p - (int) code;
			code += (unsigned int) n;
			p += n;
			t->maxcode[l] = (int) code - 1;
		} else
			t->maxcode[l] = -1;
		if (code > (1u << l))
			return -1;
		code <<= 1;
	}
	t->maxcode[17] = 0x7FFFFFFF;
	t->valoffset[17] = 0;
	memcpy(t->huffval, h->huffval, sizeof(t->huffval));
	if (dc) {
		for (int i = 0; i < p; i++)
			if (h->huffval[i] > 15)
				return -1;
		uint16_t single[1 << DC_BITS];
		snap_short_codes(h, DC_BITS, single);
		for (unsigned int i = 0; i < (1u << DC_BITS); i++) {
			int l = single[i] & 31, s = single[i] >> 8;
			if (l == 0)
				t->dc[i] = KIND_PART;
			else if (l + s <= DC_BITS) {
				unsigned int v = s ? (i >> (DC_BITS - l - s)) & ((1u << s) - 1) : 0;
				int value = s ? snap_extend(v, s) : 0;
				t->dc[i] = (uint32_t) (l + s) | (uint32_t) (uint16_t) (int16_t) value << 16;
			} else
				t->dc[i] = (uint32_t) l | KIND_PART | (uint32_t) s << 8;
		}
		return 0;
	}
	/* One symbol per index first (length | symbol << 8), then the entries. */
	uint16_t single[1 << AC_BITS];
	snap_short_codes(h, AC_BITS, single);
	for (unsigned int i = 0; i < (1u << AC_BITS); i++) {
		int l = single[i] & 31, sym = single[i] >> 8;
		if (l == 0) {
			t->ac[i] = NOT_A_RUN;
			continue;
		}
		int r = sym >> 4, s = sym & 15;
		if (s == 0) {
			/* ZRL (a run of 16 zeros) takes the symbol path; any other
			 * size-0 symbol ends the block, as in libjpeg. */
			t->ac[i] = r == 15 ? ((uint64_t) l | KIND_SYMBOL | (uint64_t) sym << 8 | NOT_A_RUN) : ((uint64_t) l | KIND_RUN | END_OF_BLOCK | NO_COEFFICIENT);
			continue;
		}
		if (l + s > AC_BITS) {
			t->ac[i] = (uint64_t) l | KIND_SYMBOL | (uint64_t) sym << 8 | NOT_A_RUN;
			continue;
		}
		int used = l + s;
		int v1 = snap_extend((i >> (AC_BITS - used)) & ((1u << s) - 1), s), v2 = v1;
		unsigned int advance1 = (unsigned int) r + 1, advance2 = 0, end = 0;
		/* What follows in the same 10 bits: a second coefficient, an end of block. */
		for (int step = 0; step < 2 && used < AC_BITS; step++) {
			int rest = AC_BITS - used;
			unsigned int follow = single[(i << used) & ((1u << AC_BITS) - 1)];
			int l2 = follow & 31, sym2 = follow >> 8;
			if (l2 == 0 || l2 > rest)
				break;
			int r2 = sym2 >> 4, s2 = sym2 & 15;
			if (s2 == 0) {
				if (r2 != 15) {
					end = END_OF_BLOCK;
					used += l2;
				}
				break;
			}
			if (step == 1 || l2 + s2 > rest)
				break;
			used += l2 + s2;
			v2 = snap_extend((i >> (AC_BITS - used)) & ((1u << s2) - 1), s2);
			advance2 = (unsigned int) r2 + 1;
		}
		t->ac[i] = (uint64_t) used | KIND_RUN | (uint64_t) advance1 << 8 | (uint64_t) advance2 << 13 | end |
			(uint64_t) (advance1 + advance2) << 20 |
			(uint64_t) (uint16_t) (int16_t) v1 << 32 | (uint64_t) (uint16_t) (int16_t) v2 << 48;
	}
	return 0;
}

/* The last position from which 8 bytes can be read without meeting a 0xFF byte
 * (a stuffed byte or a marker) or the end; NULL after a marker. */
static const uint8_t *
snap_entropy_safe(const struct snap_entropy *e)
{
	if (e->marker)
		return NULL;
	const uint8_t *ff = memchr(e->next, 0xFF, (size_t) (e->end - e->next));
	if (!ff)
		ff = e->end;
	return ff - e->next >= 8 ? ff - 8 : NULL;
}

/* The state at the start of the scan or after a restart marker: the data from
 * `next`, an empty bit buffer, DC predictions 0, a full restart interval. */
static void
snap_entropy_reset(struct snap_entropy *e, const uint8_t *next)
{
	e->next = next;
	e->acc = 0;
	e->bits = 0;
	e->pad = 0;
	e->marker = 0;
	e->marker_at = NULL;
	for (int i = 0; i < MAX_COMPS_IN_SCAN; i++)
		e->last_dc[i] = 0;
	e->restarts_to_go = e->restart_interval;
	e->safe = snap_entropy_safe(e);
}

/* The tables of the last few Huffman tables this thread decoded with: cameras
 * and most encoders write the same standard tables into every file, and
 * building the look-ups took about 0.6 % of a backfill. A hit is copied. Fixed
 * arrays, no malloc: nothing to free when a thread ends. */
#define SNAP_TABLE_CACHE 4
struct snap_table_slot {
	unsigned long used;          /* when it last served (a per-thread clock); 0: empty */
	int dc;
	UINT8 bits[17];
	UINT8 huffval[256];
	struct snap_huff table;
};
static __thread struct snap_table_slot snap_tables[SNAP_TABLE_CACHE];
static __thread unsigned long snap_tables_clock;

static int
snap_entropy_cached_table(const JHUFF_TBL *h, int dc, struct snap_huff *t)
{
	if (!h)
		return -1;
	for (int i = 0; i < SNAP_TABLE_CACHE; i++) {
		struct snap_table_slot *slot = &snap_tables[i];
		if (slot->used && slot->dc == dc && memcmp(slot->bits, h->bits, sizeof(slot->bits)) == 0 &&
			memcmp(slot->huffval, h->huffval, sizeof(slot->huffval)) == 0) {
			slot->used = ++snap_tables_clock;
			memcpy(t, &slot->table, sizeof(*t));
			return 0;
		}
	}
	if (snap_entropy_table(h, dc, t) != 0)
		return -1;
	struct snap_table_slot *slot = &snap_tables[0];
	for (int i = 1; i < SNAP_TABLE_CACHE; i++)
		if (snap_tables[i].used < slot->used)
			slot = &snap_tables[i];
	slot->used = ++snap_tables_clock;
	slot->dc = dc;
	memcpy(slot->bits, h->bits, sizeof(slot->bits));
	memcpy(slot->huffval, h->huffval, sizeof(slot->huffval));
	memcpy(&slot->table, t, sizeof(*t));
	return 0;
}

int
snap_entropy_start(struct snap_entropy *e, j_decompress_ptr c)
{
	if (c->progressive_mode || c->arith_code || c->data_precision != 8 ||
		jpeg_has_multiple_scans(c) || c->comps_in_scan != c->num_components ||
		c->blocks_in_MCU < 1 || c->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU ||
		c->src == NULL || c->unread_marker != 0)
		return -1;
	memset(e->dc_used, 0, sizeof(e->dc_used));
	memset(e->ac_used, 0, sizeof(e->ac_used));
	for (int b = 0; b < c->blocks_in_MCU; b++) {
		int ci = c->MCU_membership[b];
		if (ci < 0 || ci >= c->comps_in_scan)
			return -1;
		jpeg_component_info *comp = c->cur_comp_info[ci];
		int d = comp->dc_tbl_no, a = comp->ac_tbl_no;
		if (d < 0 || d >= NUM_HUFF_TBLS || a < 0 || a >= NUM_HUFF_TBLS)
			return -1;
		if (!e->dc_used[d] && snap_entropy_cached_table(c->dc_huff_tbl_ptrs[d], 1, &e->dc_tables[d]) != 0)
			return -1;
		if (!e->ac_used[a] && snap_entropy_cached_table(c->ac_huff_tbl_ptrs[a], 0, &e->ac_tables[a]) != 0)
			return -1;
		e->dc_used[d] = e->ac_used[a] = 1;
		e->block_dc[b] = &e->dc_tables[d];
		e->block_ac[b] = &e->ac_tables[a];
		e->block_component[b] = ci;
		e->dc_needed[b] = comp->component_needed ? 1 : 0;
		e->ac_needed[b] = comp->component_needed && comp->DCT_scaled_size > 1;
	}
	e->blocks = c->blocks_in_MCU;
	e->end = c->src->next_input_byte + c->src->bytes_in_buffer;
	e->restart_interval = c->restart_interval;
	e->next_restart = 0;
	snap_entropy_reset(e, c->src->next_input_byte);
	return 0;
}

static inline uint64_t
snap_load_be64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return __builtin_bswap64(v);
}

/* Tops the buffer up to at least 57 bits, byte by byte, as libjpeg's
 * jpeg_fill_bit_buffer reads: 0xFF 0x00 is a 0xFF byte (fill 0xFF bytes before
 * it are skipped), 0xFF then anything else is a marker, after which only zero
 * padding follows (counted in `pad`). The end of the buffer counts as a marker
 * that is no restart marker. */
static void
snap_entropy_fill_slow(struct snap_entropy *e)
{
	while (e->bits <= 56) {
		if (e->marker) {
			e->pad += 64 - e->bits;
			e->bits = 64;
			return;
		}
		const uint8_t *p = e->next;
		if (p >= e->end) {
			e->marker = -1;
			e->marker_at = p;
			continue;
		}
		unsigned int byte = *p++;
		if (byte == 0xFF) {
			while (p < e->end && *p == 0xFF)
				p++;
			if (p >= e->end) {
				e->marker = -1;
				e->marker_at = e->next;
				continue;
			}
			if (*p != 0) {
				e->marker = *p;
				e->marker_at = e->next;
				continue;
			}
			p++;
		}
		e->next = p;
		e->acc |= (uint64_t) byte << (56 - e->bits);
		e->bits += 8;
	}
}

/* A restart marker where libjpeg expects one, right after the data (less than a
 * byte of padding), with the next number: anything else is deferred. */
static int
snap_entropy_restart(struct snap_entropy *e)
{
	if (!e->marker)
		snap_entropy_fill_slow(e);
	if (e->marker != 0xD0 + e->next_restart || e->bits - e->pad >= 8)
		return SNAP_ENTROPY_DEFER;
	const uint8_t *p = e->marker_at;
	while (*p == 0xFF)
		p++;
	e->next_restart = (e->next_restart + 1) & 7;
	snap_entropy_reset(e, p + 1);
	return SNAP_ENTROPY_OK;
}

/* The bit buffer in locals while an MCU is decoded (the fills and the look-ups
 * then stay in registers); written back to `e` around the rare calls. */
#define LOAD() (acc = e->acc, bits = e->bits)
#define SAVE() (e->acc = acc, e->bits = bits)
#define FILL() do { \
	if (__builtin_expect(next <= safe, 1)) { \
		acc |= snap_load_be64(next) >> bits; \
		next += (63 - bits) >> 3; \
		bits |= 56; \
	} else if (bits < 32) { \
		e->next = next; SAVE(); snap_entropy_fill_slow(e); LOAD(); next = e->next; \
		safe = snap_entropy_safe(e); \
	} \
} while (0)
#define DROP(n) (acc <<= (n), bits -= (int) (n))

/* A code longer than the look-up (libjpeg's jpeg_huff_decode): the symbol, or
 * -1 for a bit pattern that is no code. Needs 16 bits in the buffer. */
static inline int
snap_long_code(uint64_t *acc, int *bits, const struct snap_huff *t, int first)
{
	for (int l = first; l <= 16; l++) {
		int code = (int) (*acc >> (64 - l));
		if (code <= t->maxcode[l]) {
			*acc <<= l;
			*bits -= l;
			return t->huffval[(code + t->valoffset[l]) & 0xFF];
		}
	}
	return -1;
}

int
snap_entropy_decode_mcu(struct snap_entropy *e, JBLOCKROW *blocks)
{
	if (e->restart_interval) {
		if (e->restarts_to_go == 0 && snap_entropy_restart(e) != SNAP_ENTROPY_OK)
			return SNAP_ENTROPY_DEFER;
	}
	JCOEF scratch[DCTSIZE2];
	uint64_t acc;
	int bits;
	const uint8_t *next = e->next;
	const uint8_t *safe = e->safe;
	LOAD();
	for (int b = 0; b < e->blocks; b++) {
		JCOEF *block = blocks ? blocks[b][0] : NULL;
		const struct snap_huff *dc = e->block_dc[b], *ac = e->block_ac[b];
		FILL();
		int diff;
		uint32_t d = dc->dc[acc >> (64 - DC_BITS)];
		if (__builtin_expect((d & KIND_MASK) == 0, 1)) {
			DROP(d & 31);
			diff = (int16_t) (d >> 16);
		} else {
			int s;
			if (d & 31) {
				DROP(d & 31);
				s = (int) ((d >> 8) & 15);
			} else if ((s = snap_long_code(&acc, &bits, dc, DC_BITS + 1)) < 0)
				return SNAP_ENTROPY_DEFER;
			diff = 0;
			if (s) {
				diff = snap_extend((unsigned int) (acc >> (64 - s)), s);
				DROP(s);
			}
		}
		if (e->dc_needed[b]) {
			int ci = e->block_component[b];
			/* libjpeg adds in int; wrapping here is what its builds do. */
			int dcv = (int) ((unsigned int) diff + (unsigned int) e->last_dc[ci]);
			e->last_dc[ci] = dcv;
			if (block)
				block[0] = (JCOEF) dcv;
		}
		JCOEF *out = block && e->ac_needed[b] ? block : scratch;
		const uint64_t *table = ac->ac;
		/* k: the position (zig-zag order) of the last coefficient; libjpeg's
		 * loop ends when it reaches 63. */
		int k = 0;
		for (;;) {
			FILL();
			uint64_t a = table[acc >> (64 - AC_BITS)];
			if (__builtin_expect(k + (int) ((a >> 20) & 63) < 63, 1)) {
				DROP(a & 31);
				JCOEF *to = (a & NO_COEFFICIENT) ? scratch : out;
				k += (int) ((a >> 8) & 31);
				to[jpeg_natural_order[k]] = (JCOEF) (int16_t) (a >> 32);
				k += (int) ((a >> 13) & 31);
				to[jpeg_natural_order[k]] = (JCOEF) (int16_t) (a >> 48);
				if (a & END_OF_BLOCK)
					break;
				continue;
			}
			/* One symbol at a time, as libjpeg reads it: a long code, a ZRL, a
			 * magnitude past the look-up, or a run near the end of the block. */
			int sym;
			if (!(a & 31)) {
				if ((sym = snap_long_code(&acc, &bits, ac, AC_BITS + 1)) < 0)
					return SNAP_ENTROPY_DEFER;
			} else if ((a & KIND_MASK) == KIND_SYMBOL) {
				DROP(a & 31);
				sym = (int) ((a >> 8) & 0xFF);
			} else {
				/* A KIND_RUN entry: its first symbol's code and magnitude. */
				int length;
				sym = snap_short_code(ac, (unsigned int) (acc >> (64 - AC_BITS)), AC_BITS, &length);
				DROP(length);
			}
			int r = sym >> 4, s = sym & 15;
			if (s) {
				k += r + 1;
				out[jpeg_natural_order[k]] = (JCOEF) snap_extend((unsigned int) (acc >> (64 - s)), s);
				DROP(s);
				if (k >= 63)
					break;
			} else {
				if (r != 15)
					break;
				k += 16;
				if (k >= 63)
					break;
			}
		}
	}
	e->next = next;
	e->safe = safe;
	SAVE();
	/* Bits taken from the padding after a marker: libjpeg warns and fills zeros.
	 * The end of the buffer without a marker: libjpeg's read-ahead warns. */
	if (e->bits < e->pad || e->marker < 0)
		return SNAP_ENTROPY_DEFER;
	if (e->restart_interval)
		e->restarts_to_go--;
	return SNAP_ENTROPY_OK;
}
