import Foundation

/// The JSON Schema (draft 2020-12) for `snapthumb.manifest.v1`, the manifest SnapThumb writes
/// for each upload.
///
/// The same text is published as `docs/manifest.v1.schema.json`; a test keeps the two identical,
/// so edit both together. Objects allow unknown properties (forward compatibility), but every
/// field SnapThumb writes is required and typed.
public enum ManifestSchema {
    // A raw string, so the regex backslashes read exactly as in the JSON file; the blank line
    // before the closing delimiter is the file's final newline.

    /// The schema text, byte-for-byte the content of `docs/manifest.v1.schema.json`.
    public static let json: String = #"""
    {
      "$schema": "https://json-schema.org/draft/2020-12/schema",
      "title": "SnapThumb manifest v1",
      "description": "What SnapThumb writes for each upload: the source image, the recipe that produced the variants, and one entry per variant. Objects accept properties not listed here so that v1 readers keep working when later versions add fields.",
      "type": "object",
      "required": ["schema", "key", "recipe", "source", "variants"],
      "properties": {
        "schema": {
          "description": "Identifies the format; a breaking change gets a new name.",
          "const": "snapthumb.manifest.v1"
        },
        "key": {
          "description": "The upload's key, relative to the store root.",
          "$comment": "Non-empty, no leading '/', no '..' path segment, no C0/C1 control characters. The control-character check uses [\\s\\S]* rather than relying on '$', because in ICU and Python '$' also matches before a final newline.",
          "type": "string",
          "pattern": "^(?!/)(?![\\s\\S]*[\\u0000-\\u001F\\u007F-\\u009F])(?![\\s\\S]*(?:^|/)\\.\\.(?:/|$)).+$"
        },
        "recipe": { "$ref": "#/$defs/recipe" },
        "source": { "$ref": "#/$defs/source" },
        "variants": {
          "description": "The variants by name. The three standard ones are required; any further variant must be a valid JPEG or PNG variant.",
          "type": "object",
          "required": ["square100", "pixel25", "pixel100"],
          "properties": {
            "square100": { "$ref": "#/$defs/jpegVariant" },
            "pixel25": { "$ref": "#/$defs/pngVariant" },
            "pixel100": { "$ref": "#/$defs/pngVariant" }
          },
          "additionalProperties": {
            "anyOf": [
              { "$ref": "#/$defs/jpegVariant" },
              { "$ref": "#/$defs/pngVariant" }
            ]
          }
        }
      },
      "additionalProperties": true,
      "$defs": {
        "digest": {
          "description": "A SHA-256 content digest.",
          "$comment": "maxLength makes the check exact even where '$' matches before a trailing newline.",
          "type": "string",
          "pattern": "^sha256:[0-9a-f]{64}$",
          "maxLength": 71
        },
        "positiveInteger": {
          "type": "integer",
          "minimum": 1
        },
        "recipe": {
          "description": "How the variants were made; the digest covers the canonical form of the recipe.",
          "type": "object",
          "required": ["digest", "libvips", "version", "settings"],
          "properties": {
            "digest": { "$ref": "#/$defs/digest" },
            "libvips": { "description": "The libvips version used.", "type": "string" },
            "version": { "$ref": "#/$defs/positiveInteger" },
            "settings": { "description": "Free-form encoder settings.", "type": "object" }
          },
          "additionalProperties": true
        },
        "source": {
          "description": "The uploaded image as received.",
          "type": "object",
          "required": ["bytes", "digest", "height", "mediaType", "orientation", "width"],
          "properties": {
            "bytes": { "$ref": "#/$defs/positiveInteger" },
            "digest": { "$ref": "#/$defs/digest" },
            "height": { "$ref": "#/$defs/positiveInteger" },
            "mediaType": {
              "enum": ["image/jpeg", "image/png", "image/webp", "image/heic", "image/heif", "image/avif", "image/gif"]
            },
            "orientation": {
              "description": "The EXIF orientation, 1 (upright) to 8.",
              "type": "integer",
              "minimum": 1,
              "maximum": 8
            },
            "width": { "$ref": "#/$defs/positiveInteger" }
          },
          "additionalProperties": true
        },
        "variantCommon": {
          "description": "Fields every variant has, whatever its format.",
          "type": "object",
          "required": ["budget", "budgetMode", "bytes", "degraded", "digest", "encodes", "height", "mediaType", "path", "width"],
          "properties": {
            "budget": {
              "description": "The byte budget the encoder aimed for; null means no budget.",
              "type": ["integer", "null"],
              "minimum": 1
            },
            "budgetMode": { "enum": ["bytes", "inline"] },
            "bytes": { "$ref": "#/$defs/positiveInteger" },
            "degraded": { "description": "True if the budget could not be met at the preferred settings.", "type": "boolean" },
            "digest": { "$ref": "#/$defs/digest" },
            "encodes": { "description": "How many encodes the budget search took.", "$ref": "#/$defs/positiveInteger" },
            "height": { "$ref": "#/$defs/positiveInteger" },
            "mediaType": { "enum": ["image/jpeg", "image/png"] },
            "path": {
              "description": "Where the blob is stored, relative to the store root.",
              "$comment": "The two-hex directory should equal the first two hex digits of digest; JSON Schema cannot compare two values, so readers must check that themselves. maxLength stops a trailing newline slipping past '$'.",
              "type": "string",
              "pattern": "^blobs/sha256/[0-9a-f]{2}/[0-9a-f]{64}$",
              "maxLength": 80
            },
            "width": { "$ref": "#/$defs/positiveInteger" }
          },
          "additionalProperties": true
        },
        "jpegVariant": {
          "allOf": [
            { "$ref": "#/$defs/variantCommon" },
            {
              "required": ["quality"],
              "properties": {
                "mediaType": { "const": "image/jpeg" },
                "quality": { "type": "integer", "minimum": 1, "maximum": 100 }
              }
            }
          ]
        },
        "pngVariant": {
          "allOf": [
            { "$ref": "#/$defs/variantCommon" },
            {
              "required": ["colours", "dither", "palette"],
              "properties": {
                "mediaType": { "const": "image/png" },
                "colours": { "type": "integer", "minimum": 2, "maximum": 256 },
                "dither": { "type": "boolean" },
                "palette": { "type": "string" }
              }
            }
          ]
        }
      }
    }

    """#

    /// A validator built from ``json``.
    public static let validator: JSONSchemaValidator = {
        do {
            return try JSONSchemaValidator(schema: Data(json.utf8))
        } catch {
            // The schema is a constant checked by the tests, so failing here is a programming error.
            fatalError("ManifestSchema.json is not a valid schema: \(error)")
        }
    }()
}
