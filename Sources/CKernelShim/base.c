/* What every C target of SnapThumb shares. */
#include "kernelshim.h"

#include <stdlib.h>

void snap_free(void *p) { free(p); }
