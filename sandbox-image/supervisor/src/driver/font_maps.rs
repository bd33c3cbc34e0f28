//! Which font map a pdfTeX pass reads. pdfTeX reads its whole map at the first page, and the
//! complete TeX Live's `pdftex.map` (5.4 MB, nearly all of it texlive-fonts-extra's Type 1
//! fonts) took a quarter of a second to parse: most of a short document's pass. The image also
//! holds a map of every other font (`customize.sh` makes it), which passes find first through
//! kpathsea's `TEXFONTMAPS`; a pass that fails for a font that map lacks runs again with the
//! complete one, and so does the rest of the compile.

use super::engine::Engine;

/// pdfTeX's words for a font microtype would expand that has no map entry.
const NOT_SCALABLE: &str =
    "pdfTeX error (font expansion): auto expansion is only possible with scalable fonts";
/// Where the image keeps the map without texlive-fonts-extra's fonts.
const COMMON_MAPS: &str = "/usr/share/texfleet/font-maps";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FontMap {
    /// Every font but texlive-fonts-extra's.
    Common,
    /// TeX Live's own map.
    Complete,
}

impl FontMap {
    /// What a compile's passes start with. XeTeX's fonts are found by fontconfig and its
    /// xdvipdfmx reads the map once per compile; LuaTeX's passes measured no faster.
    pub fn for_engine(engine: Engine) -> FontMap {
        match engine {
            Engine::Pdflatex => FontMap::Common,
            Engine::Xelatex | Engine::Lualatex => FontMap::Complete,
        }
    }

    /// The compile's environment for a pass with this map: kpathsea then looks for map files
    /// in [`COMMON_MAPS`] first, and the empty element after it stands for TeX Live's own path.
    pub fn environment(self, environment: &[String]) -> Vec<String> {
        let mut environment = environment.to_vec();
        if self == FontMap::Common {
            environment.push(format!("TEXFONTMAPS={COMMON_MAPS}:"));
        }
        environment
    }

    /// Whether a failed pass's log says it lacked a font: without its map entry pdfTeX takes
    /// a font for a bitmap one, which nothing makes here (`!pdfTeX error: pdflatex (file
    /// fa5brands0): Font fa5brands0 at 600 not found`), and which microtype cannot expand
    /// (`! pdfTeX error (font expansion): auto expansion is only possible with scalable
    /// fonts.`). TeX breaks log lines at 79 characters, so the lines are joined first. A
    /// document that writes such a line itself costs one more pass, once.
    pub fn lacked_font(log: &str) -> bool {
        let joined: String = log.lines().collect();
        joined.contains(NOT_SCALABLE)
            || joined.split("!pdfTeX error: ").skip(1).any(|error| {
                let error: String = error.chars().take(300).collect();
                error.contains("): Font ") && error.contains(" not found")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_common_map_names_its_folder_first() {
        let base = vec!["HOME=/nonexistent".to_string()];
        let common = FontMap::for_engine(Engine::Pdflatex).environment(&base);
        assert_eq!(
            common,
            [
                "HOME=/nonexistent",
                "TEXFONTMAPS=/usr/share/texfleet/font-maps:"
            ]
        );
        assert_eq!(FontMap::Complete.environment(&base), base);
        assert_eq!(FontMap::for_engine(Engine::Lualatex), FontMap::Complete);
        assert_eq!(FontMap::for_engine(Engine::Xelatex), FontMap::Complete);
    }

    #[test]
    fn a_font_the_map_lacks_is_told_from_other_errors() {
        assert!(FontMap::lacked_font(
            "x\n!pdfTeX error: pdflatex (file fa5brands0): Font fa5brands0 at 600 not found\n"
        ));
        // Broken at 79 characters, as TeX writes long lines.
        assert!(FontMap::lacked_font(
            "!pdfTeX error: pdflatex (file a-long-font-name-of-twenty-six): Font a-long-font-\nname-of-twenty-six at 600 not f\nound\n"
        ));
        // microtype's expansion of a font without a map entry, broken at 79 characters.
        assert!(FontMap::lacked_font(
            "! pdfTeX error (font expansion): auto expansion is only possible with scalable \nfonts.\n"
        ));
        assert!(!FontMap::lacked_font(
            "! LaTeX Error: File `x.sty' not found.\n"
        ));
        assert!(!FontMap::lacked_font("! Undefined control sequence.\n"));
    }
}
