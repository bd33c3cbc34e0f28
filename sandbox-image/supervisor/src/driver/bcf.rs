//! The data sources named by biblatex's control file (`output.bcf`), read with a real XML
//! parser. The document writes that file, and biber reads it with namespace prefixes
//! stripped, so a `<x:datasource xmlns:x="urn:x">` is as much a data source to biber as a
//! `<bcf:datasource>`, and a name split by a comment or hidden in CDATA or an entity may be
//! read differently by biber than by a string search. The reading here fails closed: every
//! element named `datasource`, in any namespace and anywhere in the file, must hold one plain
//! run of text and the attributes biblatex writes; a DOCTYPE (entities, external files) or
//! anything the parser rejects refuses the whole file.

use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

/// Why a control file was refused.
#[derive(Debug, PartialEq)]
pub struct Refused(pub String);

/// The names of the files the control file asks biber to read, in order.
pub fn data_sources(control: &str) -> Result<Vec<String>, Refused> {
    let mut reader = Reader::from_str(control);
    let mut sources = Vec::new();
    // Within a data source: its text so far, and whether anything but text came.
    let mut open: Option<(String, bool)> = None;
    loop {
        let event = reader
            .read_event()
            .map_err(|error| Refused(format!("not well-formed XML: {error}")))?;
        if let Some((_, mixed)) = open.as_mut() {
            match &event {
                Event::Text(text) => {
                    let raw: &str = text.as_ref();
                    open.as_mut().expect("open").0.push_str(raw);
                    continue;
                }
                Event::End(end) if end.local_name().as_ref() == "datasource" => {
                    let (name, mixed) = open.take().expect("open");
                    if mixed || name.contains('&') {
                        return Err(Refused(format!(
                            "a data source that is not plain text: {:?}",
                            name.trim()
                        )));
                    }
                    sources.push(name.trim().to_string());
                    continue;
                }
                Event::Eof => {}
                _ => {
                    *mixed = true;
                    continue;
                }
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
            Event::Start(element) if element.local_name().as_ref() == "datasource" => {
                check_attributes(&element)?;
                open = Some((String::new(), false));
            }
            Event::Empty(element) if element.local_name().as_ref() == "datasource" => {
                return Err(Refused("an empty data source".into()));
            }
            Event::Eof => {
                if open.is_some() {
                    return Err(Refused("an unclosed data source".into()));
                }
                return Ok(sources);
            }
            _ => {}
        }
    }
}

/// biblatex writes `type="file" datatype="bibtex|biblatexml"`, perhaps with `encoding` and
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
        (Some("file"), Some("bibtex" | "biblatexml")) => Ok(()),
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
    fn refuses_sources_biblatex_would_not_write() {
        for attributes in [
            r#"type="file" datatype="bibtex" glob="maybe""#,
            r#"type="url" datatype="bibtex""#,
            r#"type="file" datatype="ris""#,
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
