//! libpng's simplified API: the benchmark's images are made with its write
//! side and decoded with its read side, as the paper's Figure 5 did.

use std::ffi::{c_char, c_int, c_void, CStr};

/// `png_image` (png.h, libpng 1.6).
#[repr(C)]
struct PngImage {
    opaque: *mut c_void,
    version: u32,
    width: u32,
    height: u32,
    format: u32,
    flags: u32,
    colormap_entries: u32,
    warning_or_error: u32,
    message: [c_char; 64],
}

const PNG_IMAGE_VERSION: u32 = 1;
/// `PNG_FORMAT_RGB`: 8-bit red, green, blue, no alpha.
const PNG_FORMAT_RGB: u32 = 2;

extern "C" {
    fn png_image_begin_read_from_memory(image: *mut PngImage, memory: *const c_void, size: usize) -> c_int;
    fn png_image_finish_read(
        image: *mut PngImage,
        background: *const c_void,
        buffer: *mut c_void,
        row_stride: i32,
        colormap: *mut c_void,
    ) -> c_int;
    fn png_image_free(image: *mut PngImage);
    fn png_image_write_to_memory(
        image: *mut PngImage,
        memory: *mut c_void,
        memory_bytes: *mut usize,
        convert_to_8_bit: c_int,
        buffer: *const c_void,
        row_stride: i32,
        colormap: *const c_void,
    ) -> c_int;
    fn png_get_libpng_ver(png: *const c_void) -> *const c_char;
    fn zlibVersion() -> *const c_char;
}

impl PngImage {
    fn new(width: u32, height: u32) -> PngImage {
        PngImage {
            opaque: std::ptr::null_mut(),
            version: PNG_IMAGE_VERSION,
            width,
            height,
            format: PNG_FORMAT_RGB,
            flags: 0,
            colormap_entries: 0,
            warning_or_error: 0,
            message: [0; 64],
        }
    }

    fn message(&self) -> String {
        // SAFETY: libpng keeps `message` NUL-terminated (it is zeroed above).
        unsafe { CStr::from_ptr(self.message.as_ptr()) }.to_string_lossy().into_owned()
    }
}

/// An encoded PNG, kept for the life of the process: functions that are
/// cancelled mid-decode never drop what they captured, so they capture a
/// `'static` slice rather than a reference count.
#[derive(Clone, Copy, Debug)]
pub struct Png {
    pub data: &'static [u8],
    pub width: u32,
    pub height: u32,
}

impl Png {
    /// Bytes of the RGB output buffer a decode needs.
    pub fn rgb_bytes(&self) -> usize {
        self.width as usize * self.height as usize * 3
    }

    fn encode(width: u32, height: u32, pixels: &[u8]) -> Png {
        assert_eq!(pixels.len(), width as usize * height as usize * 3);
        let mut img = PngImage::new(width, height);
        let mut size = 0usize;
        // SAFETY: libpng's two-call pattern: a NULL buffer asks for the size
        // only; `pixels` holds width * height RGB pixels (stride 0: packed).
        let ok = unsafe {
            png_image_write_to_memory(&mut img, std::ptr::null_mut(), &mut size, 0, pixels.as_ptr().cast(), 0, std::ptr::null())
        };
        assert!(ok != 0, "png_image_write_to_memory (size): {}", img.message());
        let mut data = vec![0u8; size];
        // SAFETY: as above, now into a buffer of the size libpng asked for.
        let ok = unsafe {
            png_image_write_to_memory(&mut img, data.as_mut_ptr().cast(), &mut size, 0, pixels.as_ptr().cast(), 0, std::ptr::null())
        };
        assert!(ok != 0, "png_image_write_to_memory: {}", img.message());
        data.truncate(size);
        Png { data: Box::leak(data.into_boxed_slice()), width, height }
    }

    /// A photo-like picture: smooth gradients and waves in each channel
    /// plus pixel noise, so that deflate cannot squeeze it to nothing and
    /// every filter of libpng's decoder has work.
    pub fn benign(width: u32, height: u32) -> Png {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut noise = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 25) as i32 - 12
        };
        let (w, h) = (width as f64, height as f64);
        let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
        for y in 0..height {
            for x in 0..width {
                let (fx, fy) = (x as f64, y as f64);
                let wave = 60.0 * (fx / 37.0).sin() * (fy / 23.0).cos();
                let base = [255.0 * fx / w, 255.0 * fy / h, 128.0 + wave];
                for b in base {
                    pixels.push((b as i32 + noise()).clamp(0, 255) as u8);
                }
            }
        }
        Png::encode(width, height, &pixels)
    }

    /// A decompression bomb: a large all-zero RGB image, which deflate
    /// shrinks about a thousandfold.
    pub fn bomb(width: u32, height: u32) -> Png {
        let zeros = vec![0u8; width as usize * height as usize * 3];
        Png::encode(width, height, &zeros)
    }
}

/// Decodes `png` into `out` as packed RGB; returns the dimensions, or
/// libpng's message.
///
/// # Safety
/// `out` must be valid for writes of `cap` bytes for the whole call.
pub unsafe fn decode(png: &[u8], out: *mut u8, cap: usize) -> Result<(u32, u32), String> {
    let mut img = PngImage::new(0, 0);
    // SAFETY: `img` is a fresh png_image; `png` is readable for its length.
    if unsafe { png_image_begin_read_from_memory(&mut img, png.as_ptr().cast(), png.len()) } == 0 {
        return Err(img.message());
    }
    img.format = PNG_FORMAT_RGB;
    let need = img.width as usize * img.height as usize * 3;
    if need > cap {
        // SAFETY: releases what begin_read allocated.
        unsafe { png_image_free(&mut img) };
        return Err(format!("{}x{} needs {need} bytes, the buffer has {cap}", img.width, img.height));
    }
    // SAFETY: `out` holds at least width * height * 3 bytes (checked; the
    // caller vouches for `cap`); finish_read frees the image's state.
    if unsafe { png_image_finish_read(&mut img, std::ptr::null(), out.cast(), 0, std::ptr::null_mut()) } == 0 {
        return Err(img.message());
    }
    Ok((img.width, img.height))
}

/// Starts a decode and leaves it there (the header read, libpng's state
/// allocated): what a cancelled decode leaves in its libset.
pub fn begin_and_abandon(png: &[u8]) -> bool {
    let mut img = PngImage::new(0, 0);
    // SAFETY: as in `decode`; the state is deliberately never freed here
    // (the caller resets the libset, which frees it).
    unsafe { png_image_begin_read_from_memory(&mut img, png.as_ptr().cast(), png.len()) != 0 }
}

/// "libpng 1.6.39, zlib 1.2.13"
pub fn versions() -> String {
    // SAFETY: both return pointers to static NUL-terminated strings.
    let (p, z) = unsafe { (CStr::from_ptr(png_get_libpng_ver(std::ptr::null())), CStr::from_ptr(zlibVersion())) };
    format!("libpng {}, zlib {}", p.to_string_lossy(), z.to_string_lossy())
}
