// YuNet (second generation) over OpenCV's dnn module, with the output decoding done here:
// OpenCV 4.6's cv::FaceDetectorYN reads only the first generation's outputs.
#include "snap_face.h"

#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/dnn.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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
// one input shape and sets them up again (about as long as a detection) whenever the shape
// changes, so each thread keeps one network per shape it met last: portrait and landscape
// snaps alternate without that cost. OpenCV's own thread pool is turned off once: a snap's
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
// The padded input and its blob, reused from snap to snap on a thread.
thread_local cv::Mat canvas, reduced, blob;
// The skin gate's grid and its regions, likewise.
thread_local cv::Mat cells, labels, stats, centroids;
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

// Whether the photo may hold a face the network can find: a skin-coloured region at least
// 4.5 % of the short side across (a face the network finds at its input size is twice that),
// or a photo without colour (black and white: skin cannot be told). Looked for in the
// network's own input, on a grid whose short side has 64–127 cells (whole-block means); skin
// by its chroma in YCbCr (Chai and Ngan's ranges, a little widened). Half of the corpus'
// photos without people have no such region and skip the network.
bool may_hold_faces(const cv::Mat &source) {
	int shortSide = std::min(source.cols, source.rows);
	if (shortSide < 64) return true;
	int k = shortSide / 64;
	if (k > 1) cv::resize(source, cells, cv::Size(source.cols / k, source.rows / k), 0, 0, cv::INTER_AREA);
	else source.copyTo(cells);
	cv::Mat skin(cells.rows, cells.cols, CV_8U);
	int chromatic = 0;
	for (int y = 0; y < cells.rows; y++) {
		const unsigned char *p = cells.ptr<unsigned char>(y);
		unsigned char *m = skin.ptr<unsigned char>(y);
		for (int x = 0; x < cells.cols; x++) {
			int r = p[3 * x], g = p[3 * x + 1], b = p[3 * x + 2];
			// BT.601 in integers (× 1000): luma, and the red and blue differences around 128.
			int luma = 299 * r + 587 * g + 114 * b;
			int cr = 713 * (1000 * r - luma) / 1000000 + 128, cb = 564 * (1000 * b - luma) / 1000000 + 128;
			if (std::abs(cr - 128) + std::abs(cb - 128) > 6) chromatic++;
			m[x] = luma >= 35000 && cr >= 133 && cr <= 180 && cb >= 77 && cb <= 132 && r > b ? 255 : 0;
		}
	}
	if (chromatic < cells.rows * cells.cols / 20) return true;
	int least = std::max(2, (int) std::lround(0.045 * std::min(cells.cols, cells.rows)));
	int n = cv::connectedComponentsWithStats(skin, labels, stats, centroids, 8, CV_32S);
	for (int i = 1; i < n; i++) {
		int w = stats.at<int>(i, cv::CC_STAT_WIDTH), h = stats.at<int>(i, cv::CC_STAT_HEIGHT);
		if (std::min(w, h) >= least && stats.at<int>(i, cv::CC_STAT_AREA) >= least * least) return true;
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
		// face it could find, its smallest anchors being 8 px apart; OpenCV would also refuse to
		// reduce it to zero rows below.
		if (w < 8 || h < 8) return 0;
		// The network's strides go to 32: the copy goes into the top left of a black canvas
		// whose sides are multiples of 32.
		int pw = (w + 31) / 32 * 32, ph = (h + 31) / 32 * 32;
		// OpenCV 4.6's convolutions run slower on rows whose width is a multiple of 64 (128 px
		// wide: 2.2 ms, 160: 2.0 ms on the same height): one more column of cells is cheaper.
		if (pw % 64 == 0) pw += 32;
		cv::Mat source(height, width, CV_8UC3, (void *) rgb);
		canvas.create(ph, pw, CV_8UC3);
		canvas.setTo(cv::Scalar(0, 0, 0));
		cv::Mat area = canvas(cv::Rect(0, 0, w, h));
		if (w == width && h == height) source.copyTo(area);
		else {
			// Box means over whole k × k blocks first (OpenCV's fast path for an integer
			// factor; the general area resample costs a third of the network), then bilinear
			// for what is left (less than 2×, so nothing aliases). Both in integers, the
			// bilinear one OpenCV's bit-exact kind: the network sees the same input on every CPU.
			int k = std::max(1, (int) (1 / scale));
			if (k > 1 && (width / k != w || height / k != h)) {
				cv::resize(source, reduced, cv::Size(width / k, height / k), 0, 0, cv::INTER_AREA);
				cv::resize(reduced, area, cv::Size(w, h), 0, 0, cv::INTER_LINEAR_EXACT);
			} else
				cv::resize(source, area, cv::Size(w, h), 0, 0, k > 1 ? cv::INTER_AREA : cv::INTER_LINEAR_EXACT);
		}
		if (!may_hold_faces(area)) return 0;
		cv::dnn::Net *network = network_for(pw, ph, error, error_size);
		if (!network) return -1;
		// YuNet was trained on BGR pixel values 0…255.
		cv::dnn::blobFromImage(canvas, blob, 1.0, cv::Size(), cv::Scalar(), true, false, CV_32F);
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
					// A box about as large as the whole frame and not sure of itself is the
					// network answering the photo's layout, not a face (seen at scores up to
					// 0.69 on photos without people; close-up faces score above 0.9).
					if (score < 0.8f && std::min(std::min(cx + bw / 2, (float) w) - std::max(cx - bw / 2, 0.f),
					             std::min(cy + bh / 2, (float) h) - std::max(cy - bh / 2, 0.f)) >= 0.85f * std::min(w, h)) continue;
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
