/* libimagequant: palettes for the pixel-art grid. */
#define _GNU_SOURCE 1
#include "codecshim.h"

#include <stdlib.h>
#include <string.h>
#include <libimagequant.h>

/* libgomp is linked through libimagequant; its header is not always installed. */
extern void omp_set_num_threads(int n);

int
snap_quantize_palette(const unsigned char *rgba, int width, int height, int max_colours,
                      int speed, unsigned char *palette, int *count)
{
	omp_set_num_threads(1);
	liq_attr *attr = liq_attr_create();
	if (!attr)
		return -1;
	int result = -1;
	liq_image *image = NULL;
	liq_result *quant = NULL;
	if (liq_set_max_colors(attr, max_colours) != LIQ_OK)
		goto done;
	if (liq_set_speed(attr, speed) != LIQ_OK)
		goto done;
	image = liq_image_create_rgba(attr, rgba, width, height, 0);
	if (!image)
		goto done;
	if (liq_image_quantize(image, attr, &quant) != LIQ_OK)
		goto done;
	liq_set_dithering_level(quant, 0);
	/* The palette is only final after a remap; the remapped pixels are not used
	 * (the Swift side maps pixels itself, so adaptive and fixed palettes share one path). */
	size_t n = (size_t) width * height;
	unsigned char *scratch = malloc(n ? n : 1);
	if (!scratch)
		goto done;
	liq_write_remapped_image(quant, image, scratch, n);
	free(scratch);
	const liq_palette *pal = liq_get_palette(quant);
	*count = (int) pal->count;
	for (unsigned int i = 0; i < pal->count; i++) {
		palette[i * 4 + 0] = pal->entries[i].r;
		palette[i * 4 + 1] = pal->entries[i].g;
		palette[i * 4 + 2] = pal->entries[i].b;
		palette[i * 4 + 3] = pal->entries[i].a;
	}
	result = 0;
done:
	if (quant)
		liq_result_destroy(quant);
	if (image)
		liq_image_destroy(image);
	liq_attr_destroy(attr);
	return result;
}

const char *snap_liq_version(void) { return LIQ_VERSION_STRING; }
