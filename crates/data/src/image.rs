//! Synthetic images as vLLM's `random-mm` dataset sends them (`RandomMultiModalDataset`,
//! vllm/benchmarks/datasets/random.py at vllm-project/vllm 237145e): each request's image count is uniform on
//! `[min_items, max_items]`, each image's size is drawn from the bucket config by its weights, and each image is
//! sent as a base64 JPEG data URL (`process_image` in datasets/utils.py: `image.save(format="JPEG")`,
//! `data:image/jpeg;base64,…`).
//!
//! The draws come from llmbench's own seeded generator, not from vLLM's `np.random.default_rng` stream: vLLM's
//! stream interleaves the text sampler's draws and one draw per pixel, so only the distributions are the same.
//! The pixels are ours too: vLLM draws i.i.d. random RGB pixels (the worst case for the JPEG encoder); llmbench
//! writes random quantised DCT coefficients straight into a baseline JPEG, which decodes to noise of the same
//! size and a payload of the same order (about 0.56 bytes per pixel), without a DCT or an image library.

use base64::Engine as _;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng as _, RngExt as _, SeedableRng as _};

/// One image of a request: the URL that carries it, and its width and height when llmbench made it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ImageInput {
    /// Width and height of a synthetic image; `None` for an image a dataset names by its path or URL.
    pub size: Option<(u32, u32)>,
    /// `data:image/jpeg;base64,…`, or a dataset's `file://`/`http(s)://` URL.
    pub url: String,
    /// Where inference-perf weaves the image into the user text; `None` puts it after the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub place: Option<ImagePlace>,
}

/// An image's place inside the user message as inference-perf's `assemble_content` (inference_perf/apis/chat.py at
/// kubernetes-sigs/inference-perf 7de5ef2) computes it: the text is cut at `int(point · len(text))` characters.
/// With a shared prefix the prefix and the question are woven apart (`_build_user_content`): the prefix text is
/// the user text's first `prefix_chars` characters, the question what follows the one separator character after
/// it, and the two are joined again by a space.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ImagePlace {
    /// The insertion point in [0, 1] (0 = before the text, 1 = after it).
    pub point: f64,
    /// The image belongs to the shared prefix (`shared_prefix.multimodal`) rather than the question.
    pub in_prefix: bool,
    /// The length in characters of the shared prefix the user text starts with, if it has one.
    pub prefix_chars: Option<usize>,
}

impl ImageInput {
    /// An image a dataset names, as vLLM's `process_image` sends a string: a URL as it is, a path as `file://` and
    /// the path.
    pub fn named(path_or_url: &str) -> ImageInput {
        let url = if ["http://", "https://", "file://"]
            .iter()
            .any(|scheme| path_or_url.starts_with(scheme))
        {
            path_or_url.to_owned()
        } else {
            format!("file://{path_or_url}")
        };
        ImageInput {
            size: None,
            url,
            place: None,
        }
    }
}

/// One image size of vLLM's `--random-mm-bucket-config` (its key is `(height, width, 1)`), with its weight.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageBucket {
    pub height: u32,
    pub width: u32,
    /// A positive weight; the buckets' weights are normalised to probabilities as vLLM does.
    pub weight: f64,
}

/// How many images each request carries and of which sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomImages {
    /// `floor(base · (1 − ratio))`, at least 0.
    pub min_items: u32,
    /// `min(limit, ceil(base · (1 + ratio)))`: vLLM clamps the count to the per-prompt limit, so with images the
    /// only modality its per-modality cap can never stop the draws early.
    pub max_items: u32,
    /// Positive weights only (vLLM drops zero-probability buckets).
    pub buckets: Vec<ImageBucket>,
}

/// The images of `prompts` requests, drawn from `seed`: per request a count uniform on `[min_items, max_items]`
/// (`rng.integers(min, max + 1)`), then each image's bucket by weight (`rng.choice(keys, p=probabilities)`).
pub fn random_images(spec: &RandomImages, prompts: usize, seed: u64) -> Vec<Vec<ImageInput>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let total: f64 = spec.buckets.iter().map(|b| b.weight).sum();
    (0..prompts)
        .map(|_| {
            let count = rng.random_range(spec.min_items..=spec.max_items);
            (0..count)
                .map(|_| {
                    let bucket = pick_bucket(&spec.buckets, total, rng.random::<f64>());
                    let pixels_seed = rng.random::<u64>();
                    noise_image(bucket.width, bucket.height, pixels_seed)
                })
                .collect()
        })
        .collect()
}

/// The encodings AIPerf 0.13 writes synthetic images in (`--image-format`, `ImageFormat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Jpeg,
    Png,
    /// Each image PNG or JPEG, drawn uniformly (`_format_rng.choice([PNG, JPEG])`).
    Random,
}

/// A length in pixels as AIPerf samples it (`sample_positive_normal_integer(int(mean), int(stddev))`): the mean
/// rounded when the stddev is 0, else the ceiling of a normal draw rejected below 0, and at least 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PixelLength {
    pub mean: f64,
    pub stddev: f64,
}

/// AIPerf 0.13's synthetic images (`ImageGenerator` with `source: noise`, aiperf/dataset/generator/image.py):
/// `per_request` images a turn, each of a drawn width then height, in `format`.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalImages {
    pub per_request: u32,
    pub width: PixelLength,
    pub height: PixelLength,
    pub format: ImageFormat,
}

/// The images of `prompts` requests as AIPerf draws them, from `seed`.
pub fn normal_images(spec: &NormalImages, prompts: usize, seed: u64) -> Vec<Vec<ImageInput>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..prompts)
        .map(|_| {
            (0..spec.per_request)
                .map(|_| {
                    let png = match spec.format {
                        ImageFormat::Jpeg => false,
                        ImageFormat::Png => true,
                        ImageFormat::Random => rng.random::<bool>(),
                    };
                    let width = pixel_length(spec.width, &mut rng);
                    let height = pixel_length(spec.height, &mut rng);
                    let pixels_seed = rng.random::<u64>();
                    if png {
                        noise_png_image(width, height, pixels_seed)
                    } else {
                        noise_image(width, height, pixels_seed)
                    }
                })
                .collect()
        })
        .collect()
}

fn pixel_length(length: PixelLength, rng: &mut Xoshiro256PlusPlus) -> u32 {
    let mean = length.mean.trunc();
    let stddev = length.stddev.trunc();
    if stddev <= 0.0 {
        return mean.round().max(1.0) as u32;
    }
    let Ok(normal) = rand_distr::Normal::new(mean, stddev) else {
        return mean.round().max(1.0) as u32;
    };
    // `sample_normal(mean, stddev, lower=0)`: rejection sampling, 10 000 tries, then the clamped mean.
    let draw = (0..10_000)
        .map(|_| rand_distr::Distribution::sample(&normal, rng))
        .find(|v| *v >= 0.0)
        .unwrap_or(mean.max(0.0));
    draw.ceil().max(1.0).min(f64::from(u16::MAX)) as u32
}

/// A PNG of `width` × `height` random RGB pixels (AIPerf's noise source draws each channel uniformly, as here) as a
/// data URL.
pub fn noise_png_image(width: u32, height: u32, seed: u64) -> ImageInput {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    rng.fill_bytes(&mut pixels);
    png_image(width, height, &pixels, PngStyle::Fast)
}

/// numpy's `choice(p=…)`: the first bucket whose cumulative probability exceeds `uniform`.
fn pick_bucket(buckets: &[ImageBucket], total: f64, uniform: f64) -> &ImageBucket {
    let mut cumulative = 0.0;
    for bucket in buckets {
        cumulative += bucket.weight / total;
        if uniform < cumulative {
            return bucket;
        }
    }
    // Rounding can leave the last cumulative sum a hair under 1.
    &buckets[buckets.len() - 1]
}

/// inference-perf's synthetic images (`ImageDatagenConfig`, inference_perf/config/datagen/multimodal.py at
/// kubernetes-sigs/inference-perf 7de5ef2), PNG representation: per request a count, then per image a size and an
/// insertion point, each image one solid random colour.
#[derive(Debug, Clone, PartialEq)]
pub struct WovenImages {
    /// `count`: images per request, `int(sample_from_distribution(count, 1, rng)[0])`.
    pub count: crate::LengthDistribution,
    /// `insertion_point` as a number; `None` draws `rng.uniform(0.0, 1.0)` for each image.
    pub insertion_point: Option<f64>,
    /// `resolutions` as a list (a weighted draw per image, `_choose_index`); one entry of weight 1 for a single
    /// resolution (no draw); empty for none, which is 512 × 512 (`_DEFAULT_IMAGE_WH`).
    pub resolutions: Vec<ImageBucket>,
    /// `resolutions` was a list: upstream draws an index even from a list of one.
    pub weighted: bool,
}

/// One drawn image of a [`WovenImages`] spec.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WovenImage {
    pub width: u32,
    pub height: u32,
    pub point: f64,
    /// The solid colour (`rng.integers(0, 256, size=3)` in `generate_png_bytes`).
    pub rgb: [u8; 3],
}

impl WovenImages {
    /// One request's images, as `_sample_spec` (datagen/synthetic/shared_prefix_datagen.py) draws them: the count,
    /// then for each image its resolution and its insertion point; the colour comes last, from the same stream
    /// here (upstream draws it at send time from another generator).
    pub fn draw<R: rand::Rng + ?Sized>(
        &self,
        count: &crate::LengthSampler,
        rng: &mut R,
    ) -> Vec<WovenImage> {
        let n = count.sample(rng);
        let total: f64 = self.resolutions.iter().map(|b| b.weight).sum();
        (0..n)
            .map(|_| {
                let (width, height) = match self.resolutions.as_slice() {
                    [] => (512, 512),
                    [only] if !self.weighted => (only.width, only.height),
                    // `_choose_index`: weights summing to 0 pick the first, without a draw.
                    buckets if total <= 0.0 => (buckets[0].width, buckets[0].height),
                    buckets => {
                        let bucket = pick_bucket(buckets, total, rng.random::<f64>());
                        (bucket.width, bucket.height)
                    }
                };
                let point = match self.insertion_point {
                    Some(p) => p,
                    None => rng.random::<f64>(),
                };
                let rgb = [rng.random::<u8>(), rng.random::<u8>(), rng.random::<u8>()];
                WovenImage {
                    width,
                    height,
                    point,
                    rgb,
                }
            })
            .collect()
    }
}

/// A PNG of `width` × `height` pixels all of colour `rgb`, as inference-perf's `generate_png_bytes`
/// (inference_perf/mediagen/synthesis.py) writes it: 8-bit RGB, no interlace, each row filter 0, as a
/// `data:image/png;base64,…` URL. Upstream deflates with zlib at level 1; the png crate's fastest level barely
/// compresses a solid image (3.6 MB for 720p), its default level comes within about 1 % of zlib's size, so the
/// bytes differ but the payload is as large.
pub fn solid_png_image(width: u32, height: u32, rgb: [u8; 3]) -> ImageInput {
    let row: Vec<u8> = std::iter::repeat_n(rgb, width as usize).flatten().collect();
    let mut pixels = Vec::with_capacity(row.len() * height as usize);
    for _ in 0..height {
        pixels.extend_from_slice(&row);
    }
    png_image(width, height, &pixels, PngStyle::Solid)
}

/// How a PNG is deflated: noise gains nothing from effort; a solid image is deflated at the default level
/// without filters, about as small as zlib level 1 makes it.
#[derive(Clone, Copy)]
enum PngStyle {
    Fast,
    Solid,
}

/// `pixels` (RGB, 8 bits) as a PNG in a `data:image/png;base64,` URL.
fn png_image(width: u32, height: u32, pixels: &[u8], style: PngStyle) -> ImageInput {
    let mut png = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut png, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        match style {
            PngStyle::Fast => encoder.set_compression(png::Compression::Fast),
            PngStyle::Solid => {
                encoder.set_compression(png::Compression::Default);
                encoder.set_filter(png::FilterType::NoFilter);
                encoder.set_adaptive_filter(png::AdaptiveFilterType::NonAdaptive);
            }
        }
        // Writing into a Vec fails only on a size PNG cannot state; the image is then left out of the URL.
        if let Ok(mut writer) = encoder.write_header() {
            let _ = writer.write_image_data(pixels);
        }
    }
    ImageInput {
        size: Some((width, height)),
        url: format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(png)
        ),
        place: None,
    }
}

/// A noise JPEG of `width` × `height` as a data URL.
pub fn noise_image(width: u32, height: u32, seed: u64) -> ImageInput {
    let jpeg = noise_jpeg(width, height, seed);
    ImageInput {
        size: Some((width, height)),
        url: format!(
            "data:image/jpeg;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(jpeg)
        ),
        place: None,
    }
}

// Two small Huffman tables, used for every component: DC categories 0‥3 and AC symbols "run 0, size 1‥3" plus
// EOB. Three 2-bit codes and one 3-bit code each, leaving the all-ones
// code free as JPEG requires.
const HUFFMAN_BITS: [u8; 16] = [0, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const DC_SYMBOLS: [u8; 4] = [0, 1, 2, 3];
const AC_SYMBOLS: [u8; 4] = [0x01, 0x02, 0x03, 0x00];
/// The canonical codes of both tables, by position: 00, 01, 10, 110.
const CODES: [(u16, u8); 4] = [(0b00, 2), (0b01, 2), (0b10, 2), (0b110, 3)];
/// One quantiser for every coefficient: coefficients of ±1‥3 then move pixels by up to a few dozen levels.
const QUANTISER: u8 = 16;
/// Non-zero AC coefficients per block before its EOB: 24 make about 0.56 bytes a pixel, as PIL's JPEG of vLLM's
/// noise pixels (quality 75, 4:2:0) is 0.61 bytes a pixel at 256×256.
const AC_COEFFICIENTS: usize = 24;

/// A baseline JPEG (three components, no subsampling) whose every 8×8 block holds random coefficients: a DC
/// value in −3‥3, then the first [`AC_COEFFICIENTS`] AC values of magnitude 1‥3, then EOB.
pub fn noise_jpeg(width: u32, height: u32, seed: u64) -> Vec<u8> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut out = Vec::new();
    out.extend_from_slice(&[0xFF, 0xD8]);
    // JFIF APP0, as PIL writes it: version 1.1, no density unit, 1:1.
    out.extend_from_slice(&[
        0xFF, 0xE0, 0, 16, b'J', b'F', b'I', b'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0,
    ]);
    // DQT: table 0, eight-bit precision.
    out.extend_from_slice(&[0xFF, 0xDB, 0, 67, 0]);
    out.extend_from_slice(&[QUANTISER; 64]);
    // SOF0.
    let [h1, h0] = u16::try_from(height).unwrap_or(u16::MAX).to_be_bytes();
    let [w1, w0] = u16::try_from(width).unwrap_or(u16::MAX).to_be_bytes();
    out.extend_from_slice(&[0xFF, 0xC0, 0, 17, 8, h1, h0, w1, w0, 3]);
    for id in 1..=3 {
        out.extend_from_slice(&[id, 0x11, 0]);
    }
    // DHT: DC table 0 and AC table 0.
    out.extend_from_slice(&[0xFF, 0xC4, 0, 2 + 2 * (1 + 16 + 4)]);
    for (class, symbols) in [(0x00, DC_SYMBOLS), (0x10, AC_SYMBOLS)] {
        out.push(class);
        out.extend_from_slice(&HUFFMAN_BITS);
        out.extend_from_slice(&symbols);
    }
    // SOS: the three components, both tables 0, the whole spectrum.
    out.extend_from_slice(&[0xFF, 0xDA, 0, 12, 3, 1, 0, 2, 0, 3, 0, 0, 63, 0]);
    let blocks = u64::from(width.div_ceil(8)) * u64::from(height.div_ceil(8));
    let mut bits = BitWriter {
        out,
        acc: 0,
        len: 0,
    };
    let mut previous_dc = [0i32; 3];
    for _ in 0..blocks {
        for dc in &mut previous_dc {
            let value = rng.random_range(-3..=3);
            let diff = value - *dc;
            *dc = value;
            let size = magnitude_bits(diff);
            let (code, len) = CODES[position(&DC_SYMBOLS, size as u8)];
            bits.put(code, len);
            bits.put_value(diff, size);
            for _ in 0..AC_COEFFICIENTS {
                let magnitude = rng.random_range(1..=3);
                let value = if rng.random::<bool>() {
                    magnitude
                } else {
                    -magnitude
                };
                let size = magnitude_bits(value);
                let (code, len) = CODES[position(&AC_SYMBOLS, size as u8)];
                bits.put(code, len);
                bits.put_value(value, size);
            }
            let (code, len) = CODES[position(&AC_SYMBOLS, 0x00)];
            bits.put(code, len);
        }
    }
    let mut out = bits.finish();
    out.extend_from_slice(&[0xFF, 0xD9]);
    out
}

fn position(symbols: &[u8; 4], symbol: u8) -> usize {
    symbols.iter().position(|s| *s == symbol).unwrap_or(0)
}

/// JPEG's magnitude category: the bits of `|value|`.
fn magnitude_bits(value: i32) -> u32 {
    32 - value.unsigned_abs().leading_zeros()
}

/// The entropy-coded segment: bits written most significant first, a 0x00 stuffed after every 0xFF byte, the last
/// byte padded with ones.
struct BitWriter {
    out: Vec<u8>,
    acc: u32,
    len: u32,
}

impl BitWriter {
    fn put(&mut self, code: u16, len: u8) {
        for i in (0..len).rev() {
            self.bit(u32::from(code >> i) & 1);
        }
    }

    /// A coefficient's `size` extra bits: the value itself, or for a negative one its ones' complement.
    fn put_value(&mut self, value: i32, size: u32) {
        let raw = if value < 0 {
            value + (1 << size) - 1
        } else {
            value
        };
        for i in (0..size).rev() {
            self.bit((raw as u32 >> i) & 1);
        }
    }

    fn bit(&mut self, bit: u32) {
        self.acc = (self.acc << 1) | bit;
        self.len += 1;
        if self.len == 8 {
            let byte = self.acc as u8;
            self.out.push(byte);
            if byte == 0xFF {
                self.out.push(0);
            }
            self.acc = 0;
            self.len = 0;
        }
    }

    fn finish(mut self) -> Vec<u8> {
        while self.len != 0 {
            self.bit(1);
        }
        self.out
    }
}

/// The width and height of the JPEG, PNG or WEBP image a `data:image/…;base64,` URL carries, read from its header
/// (JPEG's start-of-frame segment, PNG's IHDR, WEBP's first chunk) after decoding only as much of the base64 as that takes. `None`
/// for anything else: another URL scheme, another format, a damaged header.
pub fn data_url_image_size(url: &str) -> Option<(u32, u32)> {
    let rest = url.strip_prefix("data:image/")?;
    let (_, payload) = rest.split_once(";base64,")?;
    let mut take = 1024usize;
    loop {
        let prefix = &payload.as_bytes()[..payload.len().min(take) / 4 * 4];
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(prefix)
            .ok()?;
        match header_size(&bytes) {
            Header::Size(w, h) => return Some((w, h)),
            Header::Invalid => return None,
            Header::NeedMore if prefix.len() >= payload.len() / 4 * 4 => return None,
            Header::NeedMore => take *= 4,
        }
    }
}

/// A JPEG or PNG image a dataset stores as its bytes (`base64`, as the Parquet reader gives a binary column), sent
/// as it is stored: a `data:image/png|jpeg;base64,` URL, its size read from its header. `None` for anything else.
pub fn stored_image(base64: &str) -> Option<ImageInput> {
    let head = base64::engine::general_purpose::STANDARD
        .decode(&base64.as_bytes()[..base64.len().min(16) / 4 * 4])
        .ok()?;
    let format = if head.starts_with(&[0x89, b'P', b'N', b'G']) {
        "png"
    } else if head.starts_with(&[0xFF, 0xD8]) {
        "jpeg"
    } else {
        return None;
    };
    let url = format!("data:image/{format};base64,{base64}");
    let size = data_url_image_size(&url)?;
    Some(ImageInput {
        size: Some(size),
        url,
        place: None,
    })
}

/// Pillow's `Image.MAX_IMAGE_PIXELS` (`int(1024 * 1024 * 1024 // 4 // 3)`): `Image.open` raises
/// `DecompressionBombError` for an image of more than twice as many pixels.
const PIL_MAX_IMAGE_PIXELS: u64 = 89_478_485;

/// An encoded image a dataset stores (`{"bytes": …}`, here its bytes as base64), as inference-perf's VisionArena
/// loader takes it (`VisionArenaDataGenerator._process_image`, inference_perf/datagen/dataset/visionarena_datagen.py
/// at kubernetes-sigs/inference-perf 7de5ef2): a PNG, JPEG or WEBP image Pillow opens is sent as it is stored, as a
/// `data:image/{png,jpeg,webp};base64,…` URL (`ImageRepresentation.mime_type`), its size from its header; `None`
/// for what the loader skips: bytes of another format (GIF, BMP, …), bytes Pillow cannot open or load (a PNG is
/// decoded whole here to tell; a JPEG or WEBP is read to its size only), and an image of more than twice Pillow's
/// `MAX_IMAGE_PIXELS`.
pub fn pre_encoded_image(base64: &str) -> Option<ImageInput> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64)
        .ok()?;
    let (format, (width, height)) = if bytes.starts_with(&PNG_SIGNATURE) {
        ("png", decoded_png_size(&bytes)?)
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        // `JpegImagePlugin._accept`: `prefix[:3] == b"\xFF\xD8\xFF"`.
        match header_size(&bytes) {
            Header::Size(w, h) if w > 0 && h > 0 => ("jpeg", (w, h)),
            _ => return None,
        }
    } else if bytes.len() >= 16 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        ("webp", webp_size(&bytes)?)
    } else {
        return None;
    };
    if u64::from(width) * u64::from(height) > 2 * PIL_MAX_IMAGE_PIXELS {
        return None;
    }
    Some(ImageInput {
        size: Some((width, height)),
        url: format!(
            "data:image/{format};base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&bytes)
        ),
        place: None,
    })
}

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

/// The size of a PNG that decodes whole (`pil.load()` reads every row), `None` for one that does not.
fn decoded_png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .ok()?;
    let mut buffer = vec![0; reader.output_buffer_size()];
    reader.next_frame(&mut buffer).ok()?;
    let info = reader.info();
    Some((info.width, info.height))
}

/// The canvas size a WEBP file's first chunk gives (Pillow's `WebPImagePlugin` reads it through libwebp):
/// `VP8 ` (lossy: 14-bit width and height after the frame tag and start code), `VP8L` (lossless: 14-bit
/// width − 1 and height − 1 after the signature byte) or `VP8X` (extended: 24-bit canvas width − 1 and
/// height − 1).
fn webp_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let chunk = bytes.get(12..16)?;
    let le16 = |at: usize| -> Option<u32> {
        Some(u32::from(u16::from_le_bytes([
            *bytes.get(at)?,
            *bytes.get(at + 1)?,
        ])))
    };
    let le24 = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes([
            *bytes.get(at)?,
            *bytes.get(at + 1)?,
            *bytes.get(at + 2)?,
            0,
        ]))
    };
    let (width, height) = match chunk {
        b"VP8 " => {
            if bytes.get(23..26)? != [0x9D, 0x01, 0x2A] {
                return None;
            }
            (le16(26)? & 0x3FFF, le16(28)? & 0x3FFF)
        }
        b"VP8L" => {
            if *bytes.get(20)? != 0x2F {
                return None;
            }
            let bits = u32::from_le_bytes(bytes.get(21..25)?.try_into().ok()?);
            ((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
        }
        b"VP8X" => (le24(24)? + 1, le24(27)? + 1),
        _ => return None,
    };
    (width > 0 && height > 0).then_some((width, height))
}

/// The width and height of the JPEG, PNG or WEBP image at a `file://` URL (a path after the scheme), from its header:
/// only the first bytes are read. `None` when the file cannot be read or is not such an image.
pub fn file_url_image_size(url: &str) -> Option<(u32, u32)> {
    use std::io::Read as _;
    let path = url.strip_prefix("file://")?;
    let mut file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    let mut take = 4096u64;
    loop {
        let before = bytes.len();
        (&mut file).take(take).read_to_end(&mut bytes).ok()?;
        match header_size(&bytes) {
            Header::Size(w, h) => return Some((w, h)),
            Header::Invalid => return None,
            Header::NeedMore if bytes.len() == before => return None,
            Header::NeedMore => take *= 4,
        }
    }
}

enum Header {
    Size(u32, u32),
    NeedMore,
    Invalid,
}

fn header_size(bytes: &[u8]) -> Header {
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let be16 = |b: &[u8]| u32::from(u16::from_be_bytes([b[0], b[1]]));
    if bytes.len() >= 24 && bytes[..8] == PNG_SIGNATURE && &bytes[12..16] == b"IHDR" {
        return Header::Size(be32(&bytes[16..20]), be32(&bytes[20..24]));
    }
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return match webp_size(bytes) {
            Some((w, h)) => Header::Size(w, h),
            None if bytes.len() < 30 => Header::NeedMore,
            None => Header::Invalid,
        };
    }
    if bytes.len() < 2 || bytes[..2] != [0xFF, 0xD8] {
        return if bytes.len() < 24 {
            Header::NeedMore
        } else {
            Header::Invalid
        };
    }
    // Walk the JPEG's segments to the first start-of-frame (SOF0‥SOF15 but DHT, JPG and DAC).
    let mut at = 2;
    loop {
        if at + 4 > bytes.len() {
            return Header::NeedMore;
        }
        if bytes[at] != 0xFF {
            return Header::Invalid;
        }
        let marker = bytes[at + 1];
        let length = be16(&bytes[at + 2..]) as usize;
        if matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            if at + 9 > bytes.len() {
                return Header::NeedMore;
            }
            return Header::Size(be16(&bytes[at + 7..]), be16(&bytes[at + 5..]));
        }
        if marker == 0xDA || length < 2 {
            return Header::Invalid;
        }
        at += 2 + length;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_image_is_sent_as_it_is_with_its_headers_size() {
        let png = solid_png_image(30, 20, [1, 2, 3]);
        let payload = png
            .url
            .split_once(";base64,")
            .map(|(_, p)| p)
            .expect("payload");
        let stored = stored_image(payload).expect("a PNG");
        assert_eq!(
            (stored.size, stored.url.as_str()),
            (Some((30, 20)), png.url.as_str())
        );
        let jpeg = base64::engine::general_purpose::STANDARD.encode(noise_jpeg(17, 9, 3));
        let stored = stored_image(&jpeg).expect("a JPEG");
        assert_eq!(stored.size, Some((17, 9)));
        assert!(stored.url.starts_with("data:image/jpeg;base64,"));
        assert!(
            stored_image("R0lGODlhAQABAAAAACw=").is_none(),
            "a GIF is not read"
        );
    }

    /// Pillow 13.0.0 writes these (`Image.new(mode, size, colour).save(out, format=...)`): a lossy WEBP of 30 × 20
    /// (`VP8 `), a lossless one of 7 × 5 (`VP8L`), an RGBA one of 300 × 2 (`VP8X`, with an alpha chunk) and a GIF.
    const WEBP_LOSSY: &str = "UklGRkYAAABXRUJQVlA4IDoAAABQAwCdASoeABQAPm00lkekIyIhKAgAgA2JZQB2APwAAIMoIACb//+dg9l372S///WV/Mr+ZX+7sAAA";
    const WEBP_LOSSLESS: &str = "UklGRh4AAABXRUJQVlA4TBEAAAAvBgABAAdQ5HrUo/+BiOh/AAA=";
    const WEBP_EXTENDED: &str = "UklGRmQAAABXRUJQVlA4WAoAAAAQAAAAKwEAAQAAQUxQSA8AAAABB0AgaYu3/RERR0T0PwAAVlA4IC4AAACwAwCdASosAQIAPm02mEkkIyKhIagAgA2JaQAADHThw4cOHDhugAD++3jAAAAA";
    const GIF: &str = "R0lGODdhBQAFAIEAAB7IHgAAAAAAAAAAACwAAAAABQAFAAAICwABCBxIsKBBggEBADs=";

    /// inference-perf's `_process_image`: PNG, JPEG and WEBP go as stored with their MIME type; another format, or
    /// a PNG Pillow cannot load, is left out.
    #[test]
    fn pre_encoded_images_go_as_stored_in_the_three_wire_formats() {
        for (stored, size) in [
            (WEBP_LOSSY, (30, 20)),
            (WEBP_LOSSLESS, (7, 5)),
            (WEBP_EXTENDED, (300, 2)),
        ] {
            let image = pre_encoded_image(stored).expect("a WEBP");
            assert_eq!(image.size, Some(size));
            assert_eq!(image.url, format!("data:image/webp;base64,{stored}"));
            assert_eq!(
                data_url_image_size(&image.url),
                Some(size),
                "its header reads back"
            );
        }
        let png = solid_png_image(30, 20, [1, 2, 3]);
        let payload = png
            .url
            .split_once(";base64,")
            .map(|(_, p)| p)
            .expect("payload");
        let image = pre_encoded_image(payload).expect("a PNG");
        assert_eq!(
            (image.size, image.url.as_str()),
            (Some((30, 20)), png.url.as_str())
        );
        let jpeg = base64::engine::general_purpose::STANDARD.encode(noise_jpeg(17, 9, 3));
        let image = pre_encoded_image(&jpeg).expect("a JPEG");
        assert_eq!(image.size, Some((17, 9)));
        assert_eq!(image.url, format!("data:image/jpeg;base64,{jpeg}"));

        assert!(pre_encoded_image(GIF).is_none(), "a GIF is skipped");
        // A PNG cut inside its image data: `pil.load()` fails on it.
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(payload)
            .expect("base64");
        let cut = base64::engine::general_purpose::STANDARD.encode(&bytes[..bytes.len() - 20]);
        assert!(
            pre_encoded_image(&cut).is_none(),
            "a PNG cut short is skipped"
        );
        assert!(pre_encoded_image("not base64!").is_none());
    }

    fn woven(count: u32, resolutions: Vec<ImageBucket>, weighted: bool) -> WovenImages {
        WovenImages {
            count: crate::LengthDistribution::Fixed(count),
            insertion_point: None,
            resolutions,
            weighted,
        }
    }

    fn draw(spec: &WovenImages, seed: u64) -> Vec<WovenImage> {
        let count = spec.count.sampler("count").expect("a valid count");
        spec.draw(&count, &mut Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// guide_multimodal-serving_1: `count: {type: fixed, mean: 4}` gives `np.full(1, int(4.0))`, four images;
    /// `resolutions: [{resolution: 720p, weight: 1}]` is `_PRESET_TO_WH["720p"]` = (1280, 720) whatever the
    /// index draw; `insertion_point: 0.0` is taken as it is.
    #[test]
    fn the_guides_images_are_four_720p_ones_at_the_start() {
        let mut spec = woven(4, vec![bucket(720, 1280, 1.0)], true);
        spec.insertion_point = Some(0.0);
        let drawn = draw(&spec, 7);
        assert_eq!(drawn.len(), 4);
        for image in &drawn {
            assert_eq!((image.width, image.height, image.point), (1280, 720, 0.0));
        }
    }

    /// `_choose_index`: weights summing to 0 pick index 0; a zero weight beside a positive one is never picked
    /// (numpy's `choice(p=[0, 1])`); no `resolutions` is `_DEFAULT_IMAGE_WH` (512, 512).
    #[test]
    fn resolutions_follow_upstreams_weights_and_default() {
        let zero = woven(
            3,
            vec![bucket(360, 640, 0.0), bucket(2160, 3840, 0.0)],
            true,
        );
        assert!(
            draw(&zero, 1)
                .iter()
                .all(|i| (i.width, i.height) == (640, 360))
        );
        let one_sided = woven(
            20,
            vec![bucket(720, 1280, 0.0), bucket(1080, 1920, 2.0)],
            true,
        );
        assert!(
            draw(&one_sided, 2)
                .iter()
                .all(|i| (i.width, i.height) == (1920, 1080))
        );
        let both = woven(
            200,
            vec![bucket(720, 1280, 1.0), bucket(1080, 1920, 1.0)],
            true,
        );
        let sizes: std::collections::BTreeSet<(u32, u32)> =
            draw(&both, 3).iter().map(|i| (i.width, i.height)).collect();
        assert_eq!(sizes, [(1280, 720), (1920, 1080)].into());
        let default = woven(2, Vec::new(), false);
        assert!(
            draw(&default, 4)
                .iter()
                .all(|i| (i.width, i.height) == (512, 512))
        );
    }

    /// No `insertion_point`: `rng.uniform(0.0, 1.0)` for each image, so the points differ and stay in [0, 1).
    #[test]
    fn an_unset_insertion_point_is_drawn_for_each_image() {
        let drawn = draw(&woven(50, Vec::new(), false), 5);
        assert!(drawn.iter().all(|i| (0.0..1.0).contains(&i.point)));
        let points: std::collections::BTreeSet<u64> =
            drawn.iter().map(|i| i.point.to_bits()).collect();
        assert!(points.len() > 40, "{points:?}");
        assert_eq!(drawn, draw(&woven(50, Vec::new(), false), 5), "seeded");
    }

    /// `generate_png_bytes`: 8-bit RGB of the stated size, every pixel the one drawn colour.
    #[test]
    fn a_solid_png_is_one_colour_of_the_asked_size() {
        let image = solid_png_image(37, 5, [200, 7, 99]);
        assert_eq!(image.size, Some((37, 5)));
        let b64 = image
            .url
            .strip_prefix("data:image/png;base64,")
            .expect("a PNG data URL");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64");
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
            .read_info()
            .expect("a PNG");
        let mut pixels = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut pixels).expect("a frame");
        assert_eq!((info.width, info.height), (37, 5));
        assert_eq!(
            (info.color_type, info.bit_depth),
            (png::ColorType::Rgb, png::BitDepth::Eight)
        );
        let pixels = &pixels[..info.buffer_size()];
        assert_eq!(pixels.len(), 37 * 5 * 3);
        assert!(pixels.chunks(3).all(|p| p == [200, 7, 99]));
    }

    /// Python's `len(zlib.compress(raw, 1))` for a 1280 × 720 solid image (each row a 0 filter byte and 1280
    /// pixels) is 13 670 bytes; with the PNG's 57 bytes of signature and chunks around it, about 13.7 kB, 18.3 kB
    /// in base64. The bytes differ (another deflater), the size must not by more than a few percent.
    #[test]
    fn a_solid_720p_png_is_as_large_as_upstreams() {
        let image = solid_png_image(1280, 720, [10, 200, 30]);
        let b64 = image.url.len() - "data:image/png;base64,".len();
        let upstream = (13_670 + 57usize).div_ceil(3) * 4;
        assert!(
            b64.abs_diff(upstream) * 100 < upstream * 3,
            "{b64} vs {upstream}"
        );
    }

    fn bucket(height: u32, width: u32, weight: f64) -> ImageBucket {
        ImageBucket {
            height,
            width,
            weight,
        }
    }

    #[test]
    fn noise_jpegs_say_their_size_in_the_start_of_frame() {
        for (w, h) in [(1, 1), (8, 8), (13, 29), (256, 256), (1280, 720)] {
            let image = noise_image(w, h, 7);
            assert!(image.url.starts_with("data:image/jpeg;base64,/9j/"));
            assert_eq!(data_url_image_size(&image.url), Some((w, h)), "{w}x{h}");
        }
    }

    #[test]
    fn noise_jpegs_are_about_half_a_byte_a_pixel_and_end_with_eoi() {
        let jpeg = noise_jpeg(256, 256, 1);
        assert_eq!(jpeg[jpeg.len() - 2..], [0xFF, 0xD9]);
        let per_pixel = jpeg.len() as f64 / (256.0 * 256.0);
        assert!((0.45..0.7).contains(&per_pixel), "{per_pixel}");
        // The entropy-coded data never holds a marker: every 0xFF is followed by a stuffed 0x00.
        let scan_start = jpeg.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap() + 14;
        let scan = &jpeg[scan_start..jpeg.len() - 2];
        for (i, byte) in scan.iter().enumerate() {
            if *byte == 0xFF {
                assert_eq!(scan[i + 1], 0);
            }
        }
    }

    #[test]
    fn aiperf_lengths_are_the_rounded_mean_without_a_stddev_and_positive_draws_with_one() {
        let spec = NormalImages {
            per_request: 2,
            width: PixelLength {
                mean: 64.0,
                stddev: 0.0,
            },
            height: PixelLength {
                mean: 10.0,
                stddev: 8.0,
            },
            format: ImageFormat::Random,
        };
        let images = normal_images(&spec, 50, 3);
        assert!(images.iter().all(|i| i.len() == 2));
        let all: Vec<&ImageInput> = images.iter().flatten().collect();
        assert!(
            all.iter()
                .all(|i| i.size.is_some_and(|(w, h)| w == 64 && h >= 1))
        );
        let heights: std::collections::BTreeSet<u32> =
            all.iter().filter_map(|i| i.size.map(|(_, h)| h)).collect();
        assert!(heights.len() > 5, "{heights:?}");
        for image in &all {
            assert_eq!(data_url_image_size(&image.url), image.size);
        }
        let pngs = all
            .iter()
            .filter(|i| i.url.starts_with("data:image/png;base64,"))
            .count();
        let jpegs = all
            .iter()
            .filter(|i| i.url.starts_with("data:image/jpeg;base64,"))
            .count();
        assert_eq!(pngs + jpegs, 100);
        assert!(pngs > 25 && jpegs > 25, "{pngs} PNG, {jpegs} JPEG");
    }

    #[test]
    fn a_named_image_is_sent_as_vllm_sends_a_string_a_path_as_a_file_url() {
        assert_eq!(ImageInput::named("coco/1.jpg").url, "file://coco/1.jpg");
        assert_eq!(ImageInput::named("/d/1.jpg").url, "file:///d/1.jpg");
        assert_eq!(ImageInput::named("https://x/1.jpg").url, "https://x/1.jpg");
        assert_eq!(ImageInput::named("file:///d/1.jpg").url, "file:///d/1.jpg");
        assert_eq!(ImageInput::named("x").size, None);
    }

    #[test]
    fn a_file_urls_image_size_is_read_from_the_files_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jpg");
        std::fs::write(&path, noise_jpeg(33, 17, 2)).unwrap();
        let url = format!("file://{}", path.display());
        assert_eq!(file_url_image_size(&url), Some((33, 17)));
        assert_eq!(file_url_image_size(&format!("{url}.missing")), None);
        std::fs::write(&path, b"not an image at all, not even close to one").unwrap();
        assert_eq!(file_url_image_size(&url), None);
    }

    #[test]
    fn png_sizes_are_read_from_ihdr() {
        let mut png = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13];
        png.extend_from_slice(b"IHDR");
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        png.extend_from_slice(&[8, 2, 0, 0, 0]);
        let url = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&png)
        );
        assert_eq!(data_url_image_size(&url), Some((640, 480)));
        assert_eq!(data_url_image_size("https://example.com/a.png"), None);
        assert_eq!(
            data_url_image_size("data:image/gif;base64,R0lGODlhAQABAAAAACw="),
            None
        );
    }

    #[test]
    fn image_counts_stay_in_their_range_and_sizes_follow_the_weights() {
        let spec = RandomImages {
            min_items: 1,
            max_items: 3,
            buckets: vec![bucket(16, 32, 3.0), bucket(8, 8, 1.0)],
        };
        let images = random_images(&spec, 400, 11);
        let counts: Vec<usize> = images.iter().map(Vec::len).collect();
        for n in 1..=3 {
            assert!(counts.contains(&n), "count {n} never drawn");
        }
        assert!(counts.iter().all(|n| (1..=3).contains(n)));
        let all: Vec<&ImageInput> = images.iter().flatten().collect();
        let wide = all.iter().filter(|i| i.size == Some((32, 16))).count();
        let small = all.iter().filter(|i| i.size == Some((8, 8))).count();
        assert_eq!(wide + small, all.len());
        // 3:1 weights: three quarters wide, within a generous margin.
        let share = wide as f64 / all.len() as f64;
        assert!((0.65..0.85).contains(&share), "{share}");
        assert_eq!(
            random_images(&spec, 400, 11),
            images,
            "the same seed draws the same images"
        );
    }

    #[test]
    fn the_first_bucket_whose_cumulative_probability_exceeds_the_draw_is_chosen() {
        let buckets = [bucket(1, 1, 1.0), bucket(2, 2, 1.0)];
        assert_eq!(pick_bucket(&buckets, 2.0, 0.0).width, 1);
        assert_eq!(pick_bucket(&buckets, 2.0, 0.4999).width, 1);
        assert_eq!(pick_bucket(&buckets, 2.0, 0.5).width, 2);
        assert_eq!(pick_bucket(&buckets, 2.0, 0.99999).width, 2);
    }
}
