/* png.c - 8-bit gray PNG files with libpng.  The image is encoded into
 * memory and then written with oct_file_write_atomic, so a failure never
 * leaves a partial file. */
#include "config_internal.h"

#include <fcntl.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libpng's own default limit for readers; we never write what it refuses. */
#define PNG_DIM_MAX 1000000u

typedef struct membuf {
    unsigned char *p;
    size_t len, cap;
    bool failed;
} membuf;

static void mem_write(png_structp png, png_bytep data, png_size_t n)
{
    membuf *m = png_get_io_ptr(png);
    if (m->failed)
        return;
    if (n > SIZE_MAX - m->len) {
        m->failed = true;
        png_error(png, "PNG too large");
    }
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + n)
            cap = cap > SIZE_MAX / 2 ? m->len + n : cap * 2;
        unsigned char *q = realloc(m->p, cap);
        if (!q) {
            m->failed = true;
            png_error(png, "out of memory");
        }
        m->p = q;
        m->cap = cap;
    }
    memcpy(m->p + m->len, data, n);
    m->len += n;
}

static void mem_flush(png_structp png) { (void)png; }

/* libpng's message goes into the oct_error carried as the error pointer. */
static void png_err_fn(png_structp png, png_const_charp msg)
{
    oct_error *e = png_get_error_ptr(png);
    if (e)
        snprintf(e->msg, sizeof e->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_warn_fn(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* warnings (e.g. unknown chunks) do not matter here */
}

oct_err oct_png_save_gray(const char *path, const uint8_t *pixels, uint32_t width,
                          uint32_t height, oct_error *e)
{
    return oct_png_save_gray_at(AT_FDCWD, path, pixels, width, height, e);
}

oct_err oct_png_save_gray_at(int dirfd, const char *path, const uint8_t *pixels, uint32_t width,
                             uint32_t height, oct_error *e)
{
    if (!path || !*path)
        return oct_error_set(e, OCT_EINVAL, "PNG: empty path");
    if (!pixels || width == 0 || height == 0 || width > PNG_DIM_MAX || height > PNG_DIM_MAX)
        return oct_error_set(e, OCT_EINVAL, "%s: PNG of %u x %u pixels: each side must be 1 to %u",
                             path, width, height, PNG_DIM_MAX);
    oct_error perr = {{0}};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &perr, png_err_fn,
                                              png_warn_fn);
    if (!png)
        return oct_error_set(e, OCT_ENOMEM, "%s: cannot create a PNG writer", path);
    png_infop info = png_create_info_struct(png);
    /* volatile: read after a longjmp */
    membuf *volatile mb = calloc(1, sizeof *mb);
    if (!info || !mb) {
        png_destroy_write_struct(&png, info ? &info : NULL);
        free(mb);
        return oct_error_set(e, OCT_ENOMEM, "%s: cannot create a PNG writer", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(mb->p);
        free(mb);
        return oct_error_set(e, OCT_EIO, "%s: PNG encoding failed: %s", path, perr.msg);
    }
    png_set_write_fn(png, mb, mem_write, mem_flush);
    png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    /* images are written often (save_images, octproc): favour speed over size */
    png_set_compression_level(png, 3);
    png_write_info(png, info);
    for (uint32_t y = 0; y < height; y++)
        png_write_row(png, (png_const_bytep)(pixels + (size_t)y * width));
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);

    oct_err err = oct_file_write_atomic_at(dirfd, path, mb->p, mb->len, e);
    free(mb->p);
    free(mb);
    return err;
}

oct_err oct_png_load_gray(const char *path, uint8_t **pixels, uint32_t *width, uint32_t *height,
                          oct_error *e)
{
    *pixels = NULL;
    *width = *height = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return oct_error_set(e, OCT_EIO, "%s: cannot open: %m", path);
    unsigned char sig[8];
    if (fread(sig, 1, 8, f) != 8 || png_sig_cmp(sig, 0, 8)) {
        fclose(f);
        return oct_error_set(e, OCT_EPARSE, "%s: not a PNG file", path);
    }
    oct_error perr = {{0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &perr, png_err_fn,
                                             png_warn_fn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        fclose(f);
        return oct_error_set(e, OCT_ENOMEM, "%s: cannot create a PNG reader", path);
    }
    uint8_t *volatile img = NULL;
    png_bytep *volatile rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(img);
        free(rows);
        fclose(f);
        return oct_error_set(e, OCT_EPARSE, "%s: PNG decoding failed: %s", path, perr.msg);
    }
    png_init_io(png, f);
    png_set_sig_bytes(png, 8);
    png_set_user_limits(png, PNG_DIM_MAX, PNG_DIM_MAX);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int depth = png_get_bit_depth(png, info), ctype = png_get_color_type(png, info);
    if (depth != 8 || ctype != PNG_COLOR_TYPE_GRAY ||
        png_get_interlace_type(png, info) != PNG_INTERLACE_NONE) {
        png_destroy_read_struct(&png, &info, NULL);
        fclose(f);
        return oct_error_set(e, OCT_EUNSUPPORTED,
                             "%s: PNG is %d-bit color type %d; only 8-bit gray, not interlaced, "
                             "is read",
                             path, depth, ctype);
    }
    img = malloc((size_t)w * h);
    rows = malloc(sizeof(png_bytep) * h);
    if (!img || !rows)
        png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = img + (size_t)y * w;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    fclose(f);
    *pixels = img;
    *width = w;
    *height = h;
    return OCT_OK;
}
