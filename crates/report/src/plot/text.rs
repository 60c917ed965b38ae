//! PNG text: a drawing backend that wraps plotters' bitmap backend and draws text itself, with ab_glyph and the
//! embedded DejaVu Sans.
//!
//! Why: plotters 0.3.7's ab_glyph text drops each glyph's left side bearing, so letters sit unevenly ("TTF T",
//! "m s") and a full stop floats. Here each glyph is placed at its pen position plus its bearing, with kerning,
//! on one baseline. Widths are the same advance sums plotters' own estimate uses, so its layout (which measures
//! through this backend) and the drawn text agree, and the SVG (whose text the browser draws) lines up the same.

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

/// plotters sizes fonts so that 1.24 × the em is the requested size (its SVG writes `font-size = size / 1.24`);
/// the same here, so PNG and SVG text are the same size.
const SIZE_PER_EM: f32 = 1.24;

/// A text line laid out: each glyph's outline position, and the line's width and height.
struct Line {
    glyphs: Vec<ab_glyph::Glyph>,
    width: f32,
    height: f32,
}

/// Lays `text` out on one line whose top is y = 0: the pen advances by each glyph's advance plus the kerning
/// with the glyph before it; the baseline is at the font's ascent.
fn layout(font: &FontRef<'_>, size: f64, text: &str) -> Line {
    let em = size as f32 / SIZE_PER_EM;
    let units = font.units_per_em().unwrap_or(2048.0);
    // ab_glyph scales by ascent − descent; convert the em size to that.
    let scale = PxScale::from(em * font.height_unscaled() / units);
    let scaled = font.as_scaled(scale);
    let ascent = scaled.ascent();
    let mut pen = 0.0f32;
    let mut previous = None;
    let mut glyphs = Vec::with_capacity(text.len());
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(prev) = previous {
            pen += scaled.kern(prev, id);
        }
        glyphs.push(id.with_scale_and_position(scale, point(pen, ascent)));
        pen += scaled.h_advance(id);
        previous = Some(id);
    }
    Line {
        glyphs,
        width: pen,
        height: scaled.height(),
    }
}

/// A bitmap backend whose text is drawn by [`layout`].
pub(crate) struct GlyphBackend<B> {
    inner: B,
    font: FontRef<'static>,
}

impl<B: DrawingBackend> GlyphBackend<B> {
    /// `None` when the font bytes are not a font.
    pub fn new(inner: B, font: &'static [u8]) -> Option<GlyphBackend<B>> {
        let font = FontRef::try_from_slice(font).ok()?;
        Some(GlyphBackend { inner, font })
    }
}

type DrawResult<E> = Result<(), DrawingErrorKind<E>>;

impl<B: DrawingBackend> DrawingBackend for GlyphBackend<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> DrawResult<B::ErrorType> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> DrawResult<B::ErrorType> {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> DrawResult<B::ErrorType> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> DrawResult<B::ErrorType> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> DrawResult<B::ErrorType> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> DrawResult<B::ErrorType> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> DrawResult<B::ErrorType> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> DrawResult<B::ErrorType> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> DrawResult<B::ErrorType> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<B::ErrorType>> {
        let line = layout(&self.font, style.size(), text);
        Ok((line.width.ceil() as u32, line.height.ceil() as u32))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> DrawResult<B::ErrorType> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let line = layout(&self.font, style.size(), text);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Right => -line.width,
            HPos::Center => -line.width / 2.0,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0.0,
            VPos::Center => -line.height / 2.0,
            VPos::Bottom => -line.height,
        };
        let transform = style.transform();
        let (width, height) = self.inner.get_size();
        for glyph in line.glyphs {
            let Some(outline) = self.font.outline_glyph(glyph) else {
                // A space, or a character the font has no outline for.
                continue;
            };
            let bounds = outline.px_bounds();
            let mut pixels = Vec::new();
            outline.draw(|x, y, coverage| {
                if coverage > 0.0 {
                    pixels.push((
                        (bounds.min.x + x as f32 + dx).round() as i32,
                        (bounds.min.y + y as f32 + dy).round() as i32,
                        coverage,
                    ));
                }
            });
            for (x, y, coverage) in pixels {
                let (x, y) = transform.transform(x, y);
                let (x, y) = (pos.0 + x, pos.1 + y);
                if x >= 0 && y >= 0 && (x as u32) < width && (y as u32) < height {
                    self.inner.draw_pixel(
                        (x, y),
                        BackendColor {
                            alpha: color.alpha * f64::from(coverage.min(1.0)),
                            rgb: color.rgb,
                        },
                    )?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn font() -> FontRef<'static> {
        FontRef::try_from_slice(include_bytes!("../../assets/fonts/DejaVuSans.ttf")).unwrap()
    }

    #[test]
    fn a_line_is_as_wide_as_its_advances() {
        let font = font();
        // At size 24.8 the em is 20 px; DejaVu Sans advances "0" by 1303/2048 em and "." by 651/2048 em (its
        // hmtx table): "0.0" is (2·1303 + 651) / 2048 · 20 = 31.8 px wide (digits do not kern).
        let line = layout(&font, 24.8, "0.0");
        assert!((line.width - 31.807).abs() < 0.01, "{}", line.width);
        assert_eq!(line.glyphs.len(), 3);
        // Each glyph starts where the one before it ended: x 0, 1303/2048·20 = 12.72, (1303 + 651)/2048·20 = 19.08.
        assert!((line.glyphs[1].position.x - 12.725).abs() < 0.01);
        assert!((line.glyphs[2].position.x - 19.082).abs() < 0.01);
        assert_eq!(layout(&font, 24.8, "").width, 0.0);
    }
}
