/* CFaceShim: the YuNet face detector (OpenCV's dnn) behind a small C API.
 * The only C++ in SnapThumb, in a target of its own so that the other C targets stay C and
 * links no OpenCV; FaceKit is its one Swift caller. */
#ifndef SNAP_FACE_H
#define SNAP_FACE_H

#ifdef __cplusplus
extern "C" {
#endif

/* One face, in the pixels of the image given to snap_faces_detect. */
typedef struct snap_face_box {
	float x, y, width, height;
	/* YuNet's confidence, 0…1: sqrt(class score × objectness). */
	float score;
} snap_face_box;

/* Faces in packed 8-bit RGB (width × height, rows of width × 3 bytes), looked for on a
 * copy scaled so that its short side is at most input_short pixels (and its long side at
 * most 2 × input_short). Boxes scoring below min_score are dropped, overlapping ones
 * (IoU > 0.3) merged into the best; at most max_faces are written, best first (equal
 * scores: in the network's order, so the same input gives the same boxes). A photo in colour
 * with no skin-coloured region at least 4.5 % of the short side across is not given to the
 * network at all (no faces: 0).
 * Returns the number written, or -1 (the model would not load), -2 (bad arguments),
 * -3 (the network failed); error receives a message then (NUL-terminated). */
int snap_faces_detect(const unsigned char *rgb, int width, int height, int input_short, float min_score,
                      snap_face_box *out, int max_faces, char *error, int error_size);

/* Loads the model on the calling thread now (each thread keeps its own network; the first
 * detect on a thread loads it otherwise). 0, or -1 with a message. */
int snap_faces_prepare(char *error, int error_size);

/* The OpenCV version the shim runs on ("4.6.0"). */
const char *snap_faces_opencv_version(void);

#ifdef __cplusplus
}
#endif

#endif
