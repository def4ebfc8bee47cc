import VipsKit
