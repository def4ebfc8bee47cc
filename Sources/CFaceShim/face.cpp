// YuNet (second generation) over OpenCV's dnn module, with the output decoding done here:
// OpenCV 4.6's cv::FaceDetectorYN reads only the first generation's outputs.
#include "snap_face.h"

#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/dnn.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

// The resample's sums in a fixed order, never fused into multiply-adds: the network sees the
// same input on every CPU.
#pragma clang fp contract(off)

// The model's bytes, built into the binary: nothing is read from disk at run time.
// SNAP_FACE_MODEL is the .onnx file's path (Package.swift); model/README.md says where
// it comes from.
__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        ".hidden snap_face_model_bytes\n"
        ".hidden snap_face_model_end\n"
        "snap_face_model_bytes:\n"
        ".incbin \"" SNAP_FACE_MODEL "\"\n"
        "snap_face_model_end:\n"
        ".popsection\n");
extern "C" const char snap_face_model_bytes[];
extern "C" const char snap_face_model_end[];

namespace {

void set_error(char *error, int size, const std::string &text) {
	if (!error || size <= 0) return;
	std::snprintf(error, (size_t) size, "%s", text.c_str());
}

// Networks per thread: cv::dnn::Net is not safe to run from two threads at once, and
// workers on threads (--isolation threads) each detect. A network sets up its buffers for
// one input shape and sets them up again whenever the shape changes (two shapes taking turns
// on one network: 0.27-0.29 ms more on each 1.9 ms forward), so each thread keeps one network
// per shape it met last: portrait and landscape snaps alternate without that cost. More than
// four measured no gain on photos of mixed shapes (each new one reads the model again, about
// 3 ms, and holds 2-3 MB). OpenCV's own thread pool is turned off once: a snap's
// detection is far too small to split, and one thread keeps the arithmetic in one order
// (the same boxes every time).
struct Network {
	int width = 0, height = 0;
	unsigned long used = 0;
	std::unique_ptr<cv::dnn::Net> net;
};
constexpr int shapes_kept = 4;
thread_local Network networks[shapes_kept];
thread_local unsigned long clock_tick = 0;
// The network's input blob and the skin gate's regions, reused from snap to snap on a thread.
thread_local cv::Mat blob, labels, stats, centroids;
std::once_flag single_thread;

std::unique_ptr<cv::dnn::Net> read_model() {
	auto net = std::make_unique<cv::dnn::Net>(
	    cv::dnn::readNetFromONNX(snap_face_model_bytes, (size_t) (snap_face_model_end - snap_face_model_bytes)));
	net->setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
	net->setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
	return net;
}

// The network for a width × height input on this thread (loaded on first use), or nullptr
// with a message. Width and height 0: any network (prepare).
cv::dnn::Net *network_for(int width, int height, char *error, int size) {
	std::call_once(single_thread, [] { cv::setNumThreads(1); });
	Network *slot = nullptr;
	for (Network &n : networks)
		if (n.net && ((n.width == width && n.height == height) || n.width == 0 || width == 0)) slot = &n;
	if (!slot) {
		// A free slot, else the one used longest ago.
		slot = &networks[0];
		for (Network &n : networks)
			if (!n.net || (slot->net && n.used < slot->used)) slot = &n;
		try {
			// The model is read once per slot (a few milliseconds); a slot taken over from
			// another shape keeps its network, which sets up its buffers again.
			if (!slot->net) slot->net = read_model();
		} catch (const std::exception &e) {
			set_error(error, size, std::string("the face model did not load: ") + e.what());
			slot->net.reset();
			return nullptr;
		}
	}
	if (width != 0) {
		slot->width = width;
		slot->height = height;
	}
	slot->used = ++clock_tick;
	return slot->net.get();
}

int load(char *error, int size) { return network_for(0, 0, error, size) ? 0 : -1; }

struct Candidate {
	float x, y, w, h, score;
	int order;
};

float overlap(const Candidate &a, const Candidate &b) {
	float x0 = std::max(a.x, b.x), y0 = std::max(a.y, b.y);
	float x1 = std::min(a.x + a.w, b.x + b.w), y1 = std::min(a.y + a.h, b.y + b.h);
	float inter = std::max(0.f, x1 - x0) * std::max(0.f, y1 - y0);
	float uni = a.w * a.h + b.w * b.h - inter;
	return uni > 0 ? inter / uni : 0;
}

// A thread's scratch for the resample and the skin gate. Taken by reference once per call
// (each use of a thread_local in a shared library is a call).
struct Scratch {
	std::vector<float> columns, weight_x, weight_y;
	std::vector<uint32_t> sums;
	std::vector<unsigned char> cells;
	std::vector<int> first_x, first_y;
};
thread_local Scratch scratch;

// One axis of an area resample from `from` to `to` pixels (to <= from): output o covers source
// pixels [o·from/to, (o+1)·from/to), each weighing the share of it that it overlaps (counted
// in whole units of 1/to of a pixel, then divided by `from`: the weights sum to 1). Every
// output gets `taps` weights (the most any needs) from first[o] on; unused ones are 0 and
// point in bounds.
int area_spans(int from, int to, std::vector<int> &first, std::vector<float> &weight) {
	int taps = 0;
	for (int o = 0; o < to; o++) {
		long begin = (long) o * from, end = (long) (o + 1) * from;
		taps = std::max(taps, (int) ((end - 1) / to - begin / to + 1));
	}
	first.assign((size_t) to, 0);
	weight.assign((size_t) to * taps, 0.f);
	for (int o = 0; o < to; o++) {
		long begin = (long) o * from, end = (long) (o + 1) * from;
		int start = (int) std::min<long>(begin / to, from - taps);
		first[(size_t) o] = start;
		for (long i = begin / to; i * to < end; i++)
			weight[(size_t) o * taps + (size_t) (i - start)] =
			    (float) (std::min(end, (i + 1) * to) - std::max(begin, i * to)) / (float) from;
	}
	return taps;
}

// The area average of packed RGB (width × height) at w × h (each at most the source's), as
// the network's input: planes of blue, green and red values 0…255 (YuNet was trained on BGR)
// in the top left of pw × ph planes that are otherwise 0. Each output pixel is the mean of the
// source rectangle it covers, partly covered pixels weighing what they overlap. Single-precision
// sums in one fixed order, never fused (the pragma at the top): the same input on every CPU.
void area_resample(Scratch &s, const unsigned char *source, int width, int height, float *planes, int w, int h,
                   int pw, int ph) {
	int taps_x = area_spans(width, w, s.first_x, s.weight_x), taps_y = area_spans(height, h, s.first_y, s.weight_y);
	size_t row = (size_t) width * 3, plane = (size_t) pw * ph;
	s.columns.resize(row);
	std::fill(planes, planes + 3 * plane, 0.f);
	float *columns = s.columns.data();
	for (int o = 0; o < h; o++) {
		// Down the columns first, whole rows at a time; then across.
		std::fill(columns, columns + row, 0.f);
		for (int k = 0; k < taps_y; k++) {
			float weight = s.weight_y[(size_t) o * taps_y + k];
			const unsigned char *__restrict p = source + (size_t) (s.first_y[(size_t) o] + k) * row;
			float *__restrict sums = columns;
			for (size_t x = 0; x < row; x++) sums[x] += weight * (float) p[x];
		}
		float *blue = planes + (size_t) o * pw, *green = blue + plane, *red = green + plane;
		for (int x = 0; x < w; x++) {
			const float *c = columns + (size_t) s.first_x[(size_t) x] * 3, *weight = &s.weight_x[(size_t) x * taps_x];
			float r = 0, g = 0, b = 0;
			for (int k = 0; k < taps_x; k++) {
				r += weight[k] * c[3 * k];
				g += weight[k] * c[3 * k + 1];
				b += weight[k] * c[3 * k + 2];
			}
			red[x] = r, green[x] = g, blue[x] = b;
		}
	}
}

// Whether the photo may hold a face the network can find: a skin-coloured region at least
// 4.5 % of the short side across (a face the network finds at its input size is twice that),
// or a photo without colour (black and white: skin cannot be told). Looked for on the source
// itself, on a grid whose short side has 64–127 cells (rounded means of whole k × k blocks, a
// strip at the right and bottom left out), so that the photos it turns away cost no resample;
// skin by its chroma in YCbCr (Chai and Ngan's ranges, a little widened). Half of the corpus'
// photos without people have no such region and skip the network.
bool may_hold_faces(Scratch &s, const unsigned char *pixels, int width, int height) {
	int shortSide = std::min(width, height);
	if (shortSide < 64) return true;
	int k = shortSide / 64, cw = width / k, ch = height / k;
	// A cell's mean: its sum times 2^32 / k² (rounded), rounded (a division per channel and cell
	// would cost as much as the rest of the gate). Sums stay under 2^32 for k < 4,000.
	uint64_t area = (uint64_t) k * k, scale = ((1ull << 32) + area / 2) / area;
	auto mean = [scale](uint32_t sum) { return (int) std::min<uint64_t>(((uint64_t) sum * scale + (1ull << 31)) >> 32, 255); };
	s.cells.resize((size_t) cw * ch);
	s.sums.resize((size_t) cw * k * 3);
	int chromatic = 0;
	for (int y = 0; y < ch; y++) {
		// The band's k rows summed, then each cell's k columns.
		uint32_t *columns = s.sums.data();
		size_t used = (size_t) cw * k * 3;
		std::fill(columns, columns + used, 0u);
		for (int dy = 0; dy < k; dy++) {
			const unsigned char *__restrict p = pixels + (size_t) (y * k + dy) * width * 3;
			uint32_t *__restrict sums = columns;
			for (size_t x = 0; x < used; x++) sums[x] += p[x];
		}
		unsigned char *m = s.cells.data() + (size_t) y * cw;
		for (int x = 0; x < cw; x++) {
			uint32_t sr = 0, sg = 0, sb = 0;
			for (int dx = 0; dx < k; dx++) {
				const uint32_t *c = columns + (size_t) (x * k + dx) * 3;
				sr += c[0], sg += c[1], sb += c[2];
			}
			int r = mean(sr), g = mean(sg), b = mean(sb);
			// BT.601 in integers (× 1000): luma, and the red and blue differences around 128.
			int luma = 299 * r + 587 * g + 114 * b;
			int cr = 713 * (1000 * r - luma) / 1000000 + 128, cb = 564 * (1000 * b - luma) / 1000000 + 128;
			if (std::abs(cr - 128) + std::abs(cb - 128) > 6) chromatic++;
			m[x] = luma >= 35000 && cr >= 133 && cr <= 180 && cb >= 77 && cb <= 132 && r > b ? 255 : 0;
		}
	}
	if (chromatic < ch * cw / 20) return true;
	int least = std::max(2, (int) std::lround(0.045 * std::min(cw, ch)));
	cv::Mat mask(ch, cw, CV_8U, s.cells.data());
	int regions = cv::connectedComponentsWithStats(mask, labels, stats, centroids, 8, CV_32S);
	for (int i = 1; i < regions; i++) {
		int rw = stats.at<int>(i, cv::CC_STAT_WIDTH), rh = stats.at<int>(i, cv::CC_STAT_HEIGHT);
		if (std::min(rw, rh) >= least && stats.at<int>(i, cv::CC_STAT_AREA) >= least * least) return true;
	}
	return false;
}

} // namespace

extern "C" int snap_faces_prepare(char *error, int error_size) { return load(error, error_size); }

extern "C" const char *snap_faces_opencv_version(void) { return CV_VERSION; }

extern "C" int snap_faces_detect(const unsigned char *rgb, int width, int height, int input_short, float min_score,
                                 snap_face_box *out, int max_faces, char *error, int error_size) {
	if (!rgb || width < 1 || height < 1 || input_short < 32 || max_faces < 0 || (max_faces > 0 && !out)) {
		set_error(error, error_size, "bad arguments to the face detector");
		return -2;
	}
	try {
		// The scaled copy: short side at most input_short, long side at most twice that.
		double scale = std::min({1.0, (double) input_short / std::min(width, height),
		                         2.0 * input_short / std::max(width, height)});
		int w = std::max(1, (int) std::lround(width * scale)), h = std::max(1, (int) std::lround(height * scale));
		// A strip this thin at the network's scale (a 65000 × 1 image becomes 288 × 1) holds no
		// face it could find, its smallest anchors being 8 px apart.
		if (w < 8 || h < 8) return 0;
		// The network's strides go to 32: the copy goes into the top left of a black canvas
		// whose sides are multiples of 32.
		int pw = (w + 31) / 32 * 32, ph = (h + 31) / 32 * 32;
		// OpenCV 4.6's convolutions run slower on rows 64 or 128 wide (128 × 192: 2.2–2.5 ms,
		// 160 × 192: 1.9–2.0 ms; 192 and 256 are not slow): one more column of cells is cheaper.
		if (pw == 64 || pw == 128) pw += 32;
		Scratch &buffers = scratch;
		if (!may_hold_faces(buffers, rgb, width, height)) return 0;
		cv::dnn::Net *network = network_for(pw, ph, error, error_size);
		if (!network) return -1;
		const int shape[4] = {1, 3, ph, pw};
		blob.create(4, shape, CV_32F);
		area_resample(buffers, rgb, width, height, blob.ptr<float>(), w, h, pw, ph);
		network->setInput(blob);
		static const std::vector<cv::String> names = {"cls_8", "cls_16", "cls_32", "obj_8", "obj_16", "obj_32",
		                                              "bbox_8", "bbox_16", "bbox_32"};
		std::vector<cv::Mat> outs;
		network->forward(outs, names);

		std::vector<Candidate> found;
		const int strides[3] = {8, 16, 32};
		for (int k = 0; k < 3; k++) {
			int s = strides[k], cols = pw / s, rows = ph / s;
			size_t n = (size_t) cols * rows;
			const cv::Mat &cls = outs[k], &obj = outs[3 + k], &box = outs[6 + k];
			if (cls.total() != n || obj.total() != n || box.total() != 4 * n) {
				set_error(error, error_size, "the face model's outputs have unexpected sizes");
				return -3;
			}
			const float *c = cls.ptr<float>(), *o = obj.ptr<float>(), *b = box.ptr<float>();
			for (int r = 0; r < rows; r++) {
				for (int col = 0; col < cols; col++) {
					size_t i = (size_t) r * cols + col;
					float score = std::sqrt(std::clamp(c[i], 0.f, 1.f) * std::clamp(o[i], 0.f, 1.f));
					if (!(score >= min_score)) continue;
					// Centre offsets in cells, sizes as log multiples of the stride.
					float cx = (col + b[4 * i]) * s, cy = (r + b[4 * i + 1]) * s;
					float bw = std::exp(b[4 * i + 2]) * s, bh = std::exp(b[4 * i + 3]) * s;
					if (!std::isfinite(cx) || !std::isfinite(cy) || !std::isfinite(bw) || !std::isfinite(bh)) continue;
					// A large box that is not sure of itself is the network answering the
					// photo's layout, not a face: seen on 7 of 1,000 corpus photos without
					// people, at scores 0.66–0.85 and 0.83–1.0 of the short side across, while
					// the real people photos' faces of 0.6 of the short side and more score
					// 0.89–0.94. So a box at least 0.6 of the short side across (clipped to the
					// image) must score 0.85, and one at least 0.8 across 0.9.
					float across = std::min(std::min(cx + bw / 2, (float) w) - std::max(cx - bw / 2, 0.f),
					                        std::min(cy + bh / 2, (float) h) - std::max(cy - bh / 2, 0.f)) / (float) std::min(w, h);
					if ((across >= 0.8f && score < 0.9f) || (across >= 0.6f && score < 0.85f)) continue;
					found.push_back({cx - bw / 2, cy - bh / 2, bw, bh, score, (int) found.size()});
				}
			}
		}
		std::sort(found.begin(), found.end(), [](const Candidate &a, const Candidate &b) {
			return a.score != b.score ? a.score > b.score : a.order < b.order;
		});
		std::vector<Candidate> kept;
		for (const Candidate &candidate : found) {
			bool merged = false;
			for (const Candidate &k : kept)
				if (overlap(candidate, k) > 0.3f) { merged = true; break; }
			if (!merged) kept.push_back(candidate);
			if ((int) kept.size() == max_faces) break;
		}
		// Back to the caller's pixels, clipped to the image.
		for (size_t i = 0; i < kept.size(); i++) {
			const Candidate &k = kept[i];
			float x0 = std::clamp(k.x / (float) scale, 0.f, (float) width), y0 = std::clamp(k.y / (float) scale, 0.f, (float) height);
			float x1 = std::clamp((k.x + k.w) / (float) scale, 0.f, (float) width);
			float y1 = std::clamp((k.y + k.h) / (float) scale, 0.f, (float) height);
			out[i] = {x0, y0, x1 - x0, y1 - y0, k.score};
		}
		return (int) kept.size();
	} catch (const std::exception &e) {
		set_error(error, error_size, std::string("the face detector failed: ") + e.what());
		return -3;
	}
}
