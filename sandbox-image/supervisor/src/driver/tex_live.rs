//! Which TeX Live a pdfTeX pass searches. texlive-fonts-extra is more than half of what pdfTeX
//! reads before its first page: kpathsea's file database (ls-R) at the first lookup and the
//! font map (pdftex.map, 5.4 MB, nearly all of it its Type 1 fonts) at the first page, a
//! quarter of a second together for a short document. The image holds a common TeX Live
//! without it, made by `customize.sh`: a tree of links into texmf-dist with a database of its
//! own, in which reading one of texlive-fonts-extra's TeX files stops the pass, and a map of
//! every other font. A pass that needs the complete TeX Live runs again with it, and so does
//! the rest of the compile.

use super::engine::Engine;
use std::path::Path;

/// Where the image keeps the map without texlive-fonts-extra's fonts.
const COMMON_MAPS: &str = "/usr/share/texfleet/font-maps";
/// The common tree, which pdfTeX searches as its `TEXMFDIST`.
const COMMON_TREE: &str = "/usr/share/texfleet/texmf-common";
/// What reading one of texlive-fonts-extra's TeX files in the common tree writes.
const NEEDS_COMPLETE: &str = "texfleet: this document needs the complete TeX Live";
/// pdfTeX's words for a font microtype would expand that has no map entry.
const NOT_SCALABLE: &str =
    "pdfTeX error (font expansion): auto expansion is only possible with scalable fonts";
/// TeX's words for a font whose metrics it did not find.
const NO_METRICS: &str = "not loadable: Metric (TFM) file not found";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TexLive {
    /// Every package and font but texlive-fonts-extra's.
    Common,
    /// TeX Live as installed.
    Complete,
}

impl TexLive {
    /// What a compile's passes start with: the common TeX Live for pdfTeX, when the image has
    /// it. XeTeX's fonts are found by fontconfig and its xdvipdfmx reads the map once per
    /// compile; LuaTeX's passes measured no faster.
    pub fn for_engine(engine: Engine) -> TexLive {
        match engine {
            Engine::Pdflatex if Path::new(COMMON_TREE).join("ls-R").is_file() => TexLive::Common,
            Engine::Pdflatex | Engine::Xelatex | Engine::Lualatex => TexLive::Complete,
        }
    }

    /// The compile's environment for a pass: kpathsea looks for map files in [`COMMON_MAPS`]
    /// first (the empty element after it stands for TeX Live's own path), and for everything
    /// else in [`COMMON_TREE`] where it would look in texmf-dist.
    pub fn environment(self, environment: &[String]) -> Vec<String> {
        let mut environment = environment.to_vec();
        if self == TexLive::Common {
            environment.push(format!("TEXFONTMAPS={COMMON_MAPS}:"));
            environment.push(format!("TEXMFDIST={COMMON_TREE}"));
        }
        environment
    }

    /// Whether a failed pass's log says it needed the complete TeX Live: it read one of
    /// texlive-fonts-extra's TeX files; it missed a font's metrics; or, without a font's map
    /// entry, pdfTeX took it for a bitmap font, which nothing makes here (`!pdfTeX error:
    /// pdflatex (file fa5brands0): Font fa5brands0 at 600 not found`) and which microtype
    /// cannot expand (`! pdfTeX error (font expansion): auto expansion is only possible with
    /// scalable fonts.`). TeX breaks log lines at 79 characters, so the lines are joined
    /// first. A document that writes such a line itself costs one more pass, once.
    pub fn lacked(log: &str) -> bool {
        let joined: String = log.lines().collect();
        joined.contains(NEEDS_COMPLETE)
            || joined.contains(NO_METRICS)
            || joined.contains(NOT_SCALABLE)
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
    fn only_the_common_tex_live_names_its_map_folder_and_tree() {
        let base = vec!["HOME=/nonexistent".to_string()];
        let common = TexLive::Common.environment(&base);
        assert_eq!(
            common,
            [
                "HOME=/nonexistent",
                "TEXFONTMAPS=/usr/share/texfleet/font-maps:",
                "TEXMFDIST=/usr/share/texfleet/texmf-common",
            ]
        );
        assert_eq!(TexLive::Complete.environment(&base), base);
        assert_eq!(TexLive::for_engine(Engine::Lualatex), TexLive::Complete);
        assert_eq!(TexLive::for_engine(Engine::Xelatex), TexLive::Complete);
    }

    #[test]
    fn what_the_common_tex_live_lacks_is_told_from_other_errors() {
        assert!(TexLive::lacked(
            "x\n!pdfTeX error: pdflatex (file fa5brands0): Font fa5brands0 at 600 not found\n"
        ));
        // Broken at 79 characters, as TeX writes long lines.
        assert!(TexLive::lacked(
            "!pdfTeX error: pdflatex (file a-long-font-name-of-twenty-six): Font a-long-font-\nname-of-twenty-six at 600 not f\nound\n"
        ));
        // microtype's expansion of a font without a map entry, broken at 79 characters.
        assert!(TexLive::lacked(
            "! pdfTeX error (font expansion): auto expansion is only possible with scalable \nfonts.\n"
        ));
        assert!(TexLive::lacked(
            "(/usr/share/texfleet/texmf-common/tex/generic/texfleet-complete-only/libertine.sty\n/usr/share/texfleet/texmf-common/tex/generic/texfleet-complete-only/libertine.sty:1: texf\nleet: this document needs the complete TeX Live.\n"
        ));
        assert!(TexLive::lacked(
            "! Font \\T1/LinuxLibertineT-TLF/m/n/10=LinLibertineT-tlf-t1 at 10pt not loadable: M\netric (TFM) file not found.\n"
        ));
        assert!(!TexLive::lacked("! LaTeX Error: File `x.sty' not found.\n"));
        assert!(!TexLive::lacked("! Undefined control sequence.\n"));
    }
}
