//! libpng 1.6's simplified API, as the tour and the isolation tests use
//! it (included with `#[path]`; not an example of its own).

#![allow(dead_code)]

use std::ffi::c_void;

/// `png_image` from png.h.
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
    message: [u8; 64],
}

const PNG_IMAGE_VERSION: u32 = 1;
const PNG_FORMAT_RGB: u32 = 2;

#[link(name = "png16")]
extern "C" {
    fn png_image_begin_read_from_memory(image: *mut PngImage, memory: *const c_void, size: usize) -> i32;
    fn png_image_finish_read(image: *mut PngImage, background: *const c_void, buffer: *mut c_void, stride: i32, colormap: *mut c_void) -> i32;
    fn png_image_free(image: *mut PngImage);
    fn png_image_write_to_memory(
        image: *mut PngImage,
        memory: *mut c_void,
        bytes: *mut usize,
        convert_to_8_bit: i32,
        buffer: *const c_void,
        stride: i32,
        colormap: *const c_void,
    ) -> i32;
}

fn image(w: u32, h: u32) -> PngImage {
    PngImage {
        opaque: std::ptr::null_mut(),
        version: PNG_IMAGE_VERSION,
        width: w,
        height: h,
        format: PNG_FORMAT_RGB,
        flags: 0,
        colormap_entries: 0,
        warning_or_error: 0,
        message: [0; 64],
    }
}

/// Encodes `w` x `h` RGB `pixels` as a PNG file in memory.
pub fn encode_rgb(w: u32, h: u32, pixels: &[u8]) -> Vec<u8> {
    assert_eq!(pixels.len(), (w * h * 3) as usize);
    let mut img = image(w, h);
    let mut n = 0usize;
    // SAFETY: libpng's documented two-call pattern (the size, then the
    // write into a buffer that large); `pixels` holds the whole image.
    unsafe {
        assert_ne!(png_image_write_to_memory(&mut img, std::ptr::null_mut(), &mut n, 0, pixels.as_ptr().cast(), 0, std::ptr::null()), 0);
        let mut out = vec![0u8; n];
        assert_ne!(png_image_write_to_memory(&mut img, out.as_mut_ptr().cast(), &mut n, 0, pixels.as_ptr().cast(), 0, std::ptr::null()), 0);
        out.truncate(n);
        out
    }
}

/// A `w` x `h` RGB image of zeros: a decompression bomb (a few bytes per
/// thousand pixels, every one of which the decoder must still write).
pub fn bomb(w: u32, h: u32) -> Vec<u8> {
    encode_rgb(w, h, &vec![0u8; (w * h * 3) as usize])
}

/// Decodes `png` into `out` (`len` bytes) as RGB; false on a libpng error
/// or if the image is not exactly `len` bytes. Allocates nothing of its
/// own: all the heap it uses is libpng's and zlib's.
///
/// # Safety
/// `out` is valid for `len` bytes of writes.
pub unsafe fn decode_into(png: &[u8], out: *mut u8, len: usize) -> bool {
    let mut img = image(0, 0);
    // SAFETY: libpng's documented API; `img` lives across the calls, and
    // `out` holds `len` = width * height * 3 bytes (checked).
    unsafe {
        if png_image_begin_read_from_memory(&mut img, png.as_ptr().cast(), png.len()) == 0 {
            return false;
        }
        img.format = PNG_FORMAT_RGB;
        if (img.width as usize) * (img.height as usize) * 3 != len {
            png_image_free(&mut img);
            return false;
        }
        let ok = png_image_finish_read(&mut img, std::ptr::null(), out.cast(), 0, std::ptr::null_mut());
        png_image_free(&mut img);
        ok != 0
    }
}

/// The caller's output buffer, written by a preemptible function.
pub struct Out(pub *mut u8);
// SAFETY: only the function writes it, and the caller reads it once the
// function is done or cancelled.
unsafe impl Send for Out {}
