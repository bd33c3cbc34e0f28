//! biblatex's control file (`output.bcf`), read with a real XML parser before biber sees it.
//! The document writes that file, and biber reads it with namespace prefixes stripped and
//! after normalising it to NFD, so a `<x:datasource xmlns:x="urn:x">` is as much a data
//! source to biber as a `<bcf:datasource>`, a name split by a comment or hidden in CDATA or an
//! entity may be read differently by biber than by a string search, and a character such as
//! U+226F decomposes into a `>` that only biber sees. The reading here fails closed, on the
//! same NFD text: every element named `datasource`, in any namespace and anywhere in the
//! file, must hold one plain run of text and the attributes biblatex writes; biber's own
//! options may only be those biblatex writes (`input_directory`, say, would turn a plain data
//! source name into any path); a DOCTYPE (entities, external files), another encoding or
//! anything the parser rejects refuses the whole file.

use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;
use unicode_normalization::UnicodeNormalization;

/// The biber options biblatex writes into the control file (biblatex.sty, "BIBER OPTIONS").
const BIBER_OPTIONS: &[&str] = &[
    "output_encoding",
    "input_encoding",
    "debug",
    "mincrossrefs",
    "minxrefs",
    "sortcase",
    "sortupper",
];

/// Why a control file was refused.
#[derive(Debug, PartialEq)]
pub struct Refused(pub String);

/// An element whose text must be plain: a data source, or an option key for biber.
struct Plain {
    element: &'static str,
    text: String,
    /// Anything but text came inside it (a comment, CDATA, an entity, an element).
    mixed: bool,
}

/// The names of the files the control file asks biber to read, in order.
pub fn data_sources(control: &str) -> Result<Vec<String>, Refused> {
    let control: String = control.nfd().collect();
    // biber's XMLin takes a string that does not start with '<' (after whitespace, and a
    // byte-order mark is not whitespace to it) as the name of a file to read instead.
    if !control
        .trim_start_matches([' ', '\t', '\r', '\n'])
        .starts_with('<')
    {
        return Err(Refused("text before the first element".into()));
    }
    let mut reader = Reader::from_str(&control);
    let mut sources = Vec::new();
    // For each open `options` element: whether it holds options for biber.
    let mut options: Vec<bool> = Vec::new();
    let mut open: Option<Plain> = None;
    loop {
        let event = reader
            .read_event()
            .map_err(|error| Refused(format!("not well-formed XML: {error}")))?;
        if let Some(plain) = open.as_mut() {
            match &event {
                Event::Text(text) => {
                    let raw: &str = text.as_ref();
                    plain.text.push_str(raw);
                    continue;
                }
                Event::End(end) if end.local_name().as_ref() == plain.element => {
                    let Plain {
                        element,
                        text,
                        mixed,
                    } = open.take().expect("open");
                    let text = text.trim().to_string();
                    if mixed || text.contains('&') {
                        return Err(Refused(format!(
                            "a {element} that is not plain text: {text:?}"
                        )));
                    }
                    if element == "datasource" {
                        sources.push(text);
                    } else if !BIBER_OPTIONS.contains(&text.as_str()) {
                        return Err(Refused(format!("the biber option {text:?}")));
                    }
                    continue;
                }
                Event::Eof => {}
                _ => {
                    plain.mixed = true;
                    continue;
                }
            }
        }
        // XML::LibXML::Simple reads an attribute `content` as an element's text: a
        // `<key content="input_directory"/>` is a key to biber.
        if let Event::Start(element) | Event::Empty(element) = &event {
            if attribute(element, "content").is_some() {
                return Err(Refused("an attribute named content".into()));
            }
        }
        match event {
            Event::DocType(_) => return Err(Refused("a DOCTYPE".into())),
            // biber's parser would decode another encoding (UTF-7, say) into other markup.
            Event::Decl(declaration) => {
                if let Some(encoding) = declaration.encoding() {
                    let encoding = encoding.map_err(|_| Refused("a bad declaration".into()))?;
                    if !encoding.eq_ignore_ascii_case("utf-8") {
                        return Err(Refused(format!("the encoding {encoding:?}")));
                    }
                }
            }
            Event::Start(element) => match element.local_name().as_ref() {
                "datasource" => {
                    check_attributes(&element)?;
                    open = Some(Plain::new("datasource"));
                }
                // Options of any component but biblatex's are taken as biber's.
                "options" => {
                    options.push(attribute(&element, "component") != Some("biblatex".into()))
                }
                "key" if options.contains(&true) => {
                    if element.attributes().next().is_some() {
                        return Err(Refused("a biber option key with attributes".into()));
                    }
                    open = Some(Plain::new("key"));
                }
                _ => {}
            },
            Event::End(element) if element.local_name().as_ref() == "options" => {
                options.pop();
            }
            Event::Empty(element)
                if element.local_name().as_ref() == "datasource"
                    || element.local_name().as_ref() == "key" && options.contains(&true) =>
            {
                return Err(Refused("an empty data source or option key".into()));
            }
            Event::Eof => {
                if open.is_some() {
                    return Err(Refused("an unclosed element".into()));
                }
                return Ok(sources);
            }
            _ => {}
        }
    }
}

impl Plain {
    fn new(element: &'static str) -> Plain {
        Plain {
            element,
            text: String::new(),
            mixed: false,
        }
    }
}

/// The raw value of the attribute `name` (in any namespace), if the element has it.
fn attribute(element: &BytesStart, name: &str) -> Option<String> {
    element
        .attributes()
        .flatten()
        .find(|attribute| attribute.key.local_name().as_ref() == name)
        .map(|attribute| attribute.value.into_owned())
}

/// biblatex writes `type="file" datatype="bibtex"`, perhaps with `encoding` and
/// `glob`. Other types would fetch the name; a glob is harmless on a name without wildcards,
/// which the caller checks.
fn check_attributes(element: &BytesStart) -> Result<(), Refused> {
    let mut kind = None;
    let mut datatype = None;
    for attribute in element.attributes() {
        let attribute = attribute.map_err(|error| Refused(format!("an attribute: {error}")))?;
        if attribute.key.as_namespace_binding().is_some() {
            continue;
        }
        // Raw, not unescaped: an entity in a value refuses it rather than being decoded.
        let value = attribute.value.into_owned();
        match attribute.key.local_name().as_ref() {
            "type" => kind = Some(value),
            "datatype" => datatype = Some(value),
            "glob" if value == "false" || value == "true" => {}
            "encoding" if super::names::is_safe_name(&value) => {}
            other => {
                return Err(Refused(format!(
                    "a data source attribute {other}={value:?}"
                )))
            }
        }
    }
    match (kind.as_deref(), datatype.as_deref()) {
        // Not biblatexml: biber parses it with XML::LibXML's defaults, external entities on.
        (Some("file"), Some("bibtex")) => Ok(()),
        _ => Err(Refused(format!(
            "a data source of type {kind:?} and datatype {datatype:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<bcf:controlfile version="3.11" bltxversion="3.20" xmlns:bcf="https://sourceforge.net/projects/biblatex">"#;

    fn control(body: &str) -> String {
        format!("{HEAD}{body}</bcf:controlfile>")
    }

    #[test]
    fn reads_the_sources_biblatex_writes() {
        let text = control(
            r#"<bcf:bibdata section="0">
    <bcf:datasource type="file" datatype="bibtex" glob="false">refs.bib</bcf:datasource>
    <bcf:datasource type="file" datatype="bibtex" glob="false">/etc/passwd</bcf:datasource>
  </bcf:bibdata>"#,
        );
        assert_eq!(data_sources(&text).unwrap(), ["refs.bib", "/etc/passwd"]);
        let text = control(
            r#"<bcf:datasource type="file" datatype="bibtex" encoding="latin1" glob="true">a.bib</bcf:datasource>"#,
        );
        assert_eq!(data_sources(&text).unwrap(), ["a.bib"]);
    }

    #[test]
    fn finds_sources_in_any_namespace() {
        let text = control(
            r#"<x:datasource xmlns:x="urn:x" type="file" datatype="bibtex">/usr/share/texlive/xampl.bib</x:datasource>
               <datasource type="file" datatype="bibtex">b.bib</datasource>"#,
        );
        assert_eq!(
            data_sources(&text).unwrap(),
            ["/usr/share/texlive/xampl.bib", "b.bib"]
        );
    }

    #[test]
    fn refuses_what_could_be_read_differently() {
        let source = |inner: &str| {
            control(&format!(
                r#"<bcf:datasource type="file" datatype="bibtex">{inner}</bcf:datasource>"#
            ))
        };
        for hidden in [
            "a<!-- -->/etc/passwd",
            "<![CDATA[/etc/passwd]]>",
            "&#47;etc&#47;passwd",
            "a<b>/etc/passwd</b>",
            "a<?pi x?>b",
        ] {
            assert!(data_sources(&source(hidden)).is_err(), "{hidden} passed");
        }
        let doctype = format!(
            "<!DOCTYPE x [<!ENTITY e SYSTEM \"/etc/passwd\">]>{}",
            control("")
        );
        assert!(data_sources(&doctype).is_err());
        assert!(data_sources(&control("<bcf:datasource>")).is_err());
        assert!(data_sources("<a></b>").is_err());
        let utf7 = control("").replace("UTF-8", "UTF-7");
        assert!(data_sources(&utf7).is_err());
    }

    #[test]
    fn biber_options_are_only_those_biblatex_writes() {
        let options = |component: &str, key: &str| {
            control(&format!(
                r#"<bcf:options component="{component}" type="global">
    <bcf:option type="singlevalued"><bcf:key>{key}</bcf:key><bcf:value>x</bcf:value></bcf:option>
  </bcf:options><bcf:datasource type="file" datatype="bibtex">passwd</bcf:datasource>"#
            ))
        };
        assert_eq!(
            data_sources(&options("biber", "output_encoding")).unwrap(),
            ["passwd"]
        );
        assert!(data_sources(&options("biblatex", "input_directory")).is_ok());
        for (component, key) in [
            ("biber", "input_directory"),
            ("biber", "recodedata"),
            ("other", "input_directory"),
            ("biber", "debug<!-- -->"),
            ("b&#105;blatex", "input_directory"),
        ] {
            assert!(
                data_sources(&options(component, key)).is_err(),
                "{component} {key} passed"
            );
        }
    }

    #[test]
    fn reads_what_biber_reads_after_normalising() {
        // U+226F decomposes into '>' and U+0338: the tag ends there for biber.
        let text = control(
            "<bcf:bibdata section=\"0\" \u{226F} a='<bcf:datasource type=\"file\" datatype=\"bibtex\">/etc/passwd</bcf:datasource>'></bcf:bibdata>",
        );
        assert_eq!(data_sources(&text).unwrap(), ["/etc/passwd"]);
    }

    #[test]
    fn refuses_sources_biblatex_would_not_write() {
        for attributes in [
            r#"type="file" datatype="bibtex" glob="maybe""#,
            r#"type="url" datatype="bibtex""#,
            r#"type="file" datatype="ris""#,
            r#"type="file" datatype="biblatexml""#,
            r#"datatype="bibtex""#,
            r#"type="file" datatype="bibtex" encoding="a b""#,
            r#"type="file" datatype="bibtex" other="x""#,
        ] {
            let text = control(&format!(
                "<bcf:datasource {attributes}>a.bib</bcf:datasource>"
            ));
            assert!(data_sources(&text).is_err(), "{attributes} passed");
        }
    }
}
