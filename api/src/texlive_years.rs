//! What each TeX Live year of the deployment holds, as `GET /info` describes it: the Debian
//! packages its sandbox image is built from, read from the very lists the image build reads
//! (`sandbox-image/base/texlive-<year>.txt`, compiled in), so the two cannot disagree.

use serde::Serialize;
use strum::VariantArray as _;
use texfleet_core::model::Engine;
use utoipa::ToSchema;

/// Each year's list of Debian packages, with comments saying why.
const LISTS: [(&str, &str); 3] = [
    (
        "2022",
        include_str!("../../sandbox-image/base/texlive-2022.txt"),
    ),
    (
        "2024",
        include_str!("../../sandbox-image/base/texlive-2024.txt"),
    ),
    (
        "2026",
        include_str!("../../sandbox-image/base/texlive-2026.txt"),
    ),
];

/// The Debian releases that package each year, by the codename the lists name.
const RELEASES: [(&str, &str); 3] = [
    ("bookworm", "Debian 12 (bookworm)"),
    ("trixie", "Debian 13 (trixie)"),
    ("forky", "Debian 14 (forky, testing)"),
];

/// Engines a year does not offer, and why.
const WITHHELD: [(&str, Engine, &str); 1] = [(
    "2022",
    Engine::Lualatex,
    "TeX Live 2022's LuaTeX (1.15) does not hold Lua's debug library back: only the order of \
     the job's first line keeps it from a document",
)];

/// Why `year` does not offer `engine`, if it does not.
pub fn withheld(year: &str, engine: Engine) -> Option<&'static str> {
    WITHHELD
        .iter()
        .find(|(withheld_year, withheld_engine, _)| {
            *withheld_year == year && *withheld_engine == engine
        })
        .map(|(_, _, why)| *why)
}

/// One TeX Live year of the deployment.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "year": "2024",
    "texlive": "TeX Live 2024, as packaged by Debian 13 (trixie)",
    "sandbox_image": "sha256:4f0c9d2e8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d",
    "engines": ["pdflatex", "xelatex", "lualatex"],
    "collections": ["texlive-latex-recommended", "texlive-pictures"],
    "language_packs": ["texlive-lang-german", "texlive-lang-french"],
    "other_packages": ["ghostscript", "fonts-font-awesome"]
}))]
pub struct Year {
    /// What requests name in `texlive`.
    pub year: String,
    /// The release and who packaged it.
    pub texlive: String,
    /// The id of the sandbox image the live schedulers run for this year; null when none
    /// runs one (its jobs wait in the queue), or they run different ones.
    pub sandbox_image: Option<String>,
    pub engines: Vec<Engine>,
    /// The TeX Live collections installed (Debian's `texlive-*` packages).
    pub collections: Vec<&'static str>,
    /// The TeX Live language packs installed (Debian's `texlive-lang-*` packages).
    pub language_packs: Vec<&'static str>,
    /// Fonts and tools installed beside TeX Live (Debian package names).
    pub other_packages: Vec<&'static str>,
}

impl Year {
    /// `year` as its list describes it; a year without a list (an image the operator built
    /// from a list of their own) lists no packages.
    pub fn describe(year: &str, sandbox_image: Option<String>) -> Year {
        let list = LISTS
            .iter()
            .find(|(known, _)| *known == year)
            .map_or("", |(_, list)| list);
        let release = list
            .lines()
            .find_map(|line| line.strip_prefix("# debian:"))
            .map(str::trim)
            .and_then(|codename| RELEASES.iter().find(|(name, _)| *name == codename))
            .map_or(String::new(), |(_, release)| {
                format!(", as packaged by {release}")
            });
        let (language_packs, rest): (Vec<_>, Vec<_>) =
            packages(list).partition(|name| name.starts_with("texlive-lang-"));
        let (collections, other_packages) = rest
            .into_iter()
            .partition(|name| name.starts_with("texlive-"));
        Year {
            year: year.to_string(),
            texlive: format!("TeX Live {year}{release}"),
            sandbox_image,
            engines: Engine::VARIANTS
                .iter()
                .copied()
                .filter(|engine| withheld(year, *engine).is_none())
                .collect(),
            collections,
            language_packs,
            other_packages,
        }
    }
}

/// The package names of a list: its lines that are neither blank nor comments.
fn packages(list: &'static str) -> impl Iterator<Item = &'static str> {
    list.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_year_is_described_from_its_list() {
        let year = Year::describe("2022", None);
        assert_eq!(
            year.texlive,
            "TeX Live 2022, as packaged by Debian 12 (bookworm)"
        );
        assert!(year.collections.contains(&"texlive-publishers"));
        assert!(year.other_packages.contains(&"ghostscript"));
        let complete = Year::describe("2024", None);
        assert!(complete.language_packs.contains(&"texlive-lang-japanese"));
        assert!(!year.language_packs.contains(&"texlive-lang-japanese"));
        for (year, _) in LISTS {
            let described = Year::describe(year, None);
            assert!(
                described.texlive.contains("Debian"),
                "{}",
                described.texlive
            );
            assert!(described
                .collections
                .iter()
                .chain(&described.other_packages)
                .all(|name| !name.contains(' ') && !name.is_empty()));
        }
        assert!(!year.engines.contains(&Engine::Lualatex));
        assert!(complete.engines.contains(&Engine::Lualatex));
        let unknown = Year::describe("2030", None);
        assert_eq!(unknown.texlive, "TeX Live 2030");
        assert!(unknown.collections.is_empty());
    }
}
