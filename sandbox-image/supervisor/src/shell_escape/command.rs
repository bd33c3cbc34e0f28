//! The command lines that TeX's restricted shell escape hands to `/bin/sh`, read back into an
//! argument vector.
//!
//! kpathsea (`shell_cmd_is_allowed` in web2c's `texmfmp.c`, the same in LuaTeX) lets a
//! command through only when its first word is on `shell_escape_commands`, and then writes it
//! again as that word, unquoted, followed by each argument in single quotes: `'...'`, or two
//! quoted pieces side by side (`'--format=''other text'`) when the document quoted part of a
//! word with `"`. An argument holds no `'`, `"` or NUL; inside the quotes every other byte is
//! literal. Words are separated by spaces and tabs only. Anything else did not come from
//! kpathsea, and is refused.

/// Why a command line is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Malformed {
    Empty,
    /// The program's name is followed by something other than a space or a tab.
    Name,
    /// A byte outside the quotes that is neither a space nor a tab.
    Unquoted(u8),
    Unterminated,
    /// A `"` inside an argument, which kpathsea never lets through.
    DoubleQuote,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::Empty => write!(f, "an empty command"),
            Malformed::Name => write!(f, "a program name that runs into its arguments"),
            Malformed::Unquoted(byte) => {
                write!(f, "the unquoted byte {:?}", char::from(*byte))
            }
            Malformed::Unterminated => write!(f, "an unterminated quote"),
            Malformed::DoubleQuote => write!(f, "a double quote inside an argument"),
        }
    }
}

/// The program name and the arguments of a command line in kpathsea's quoting.
pub fn split(line: &[u8]) -> Result<(Vec<u8>, Vec<Vec<u8>>), Malformed> {
    let is_blank = |byte: u8| byte == b' ' || byte == b'\t';
    let name_end = line
        .iter()
        .position(|&byte| is_blank(byte))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return Err(Malformed::Empty);
    }
    if name.iter().any(|&byte| byte == b'\'' || byte == b'"') {
        return Err(Malformed::Name);
    }
    let mut arguments = Vec::new();
    let mut rest = &line[name_end..];
    loop {
        let blanks = rest.iter().take_while(|&&byte| is_blank(byte)).count();
        rest = &rest[blanks..];
        let Some(&first) = rest.first() else {
            break;
        };
        if blanks == 0 || first != b'\'' {
            return Err(Malformed::Unquoted(first));
        }
        let mut argument = Vec::new();
        while rest.first() == Some(&b'\'') {
            let closing = rest[1..]
                .iter()
                .position(|&byte| byte == b'\'')
                .ok_or(Malformed::Unterminated)?;
            argument.extend_from_slice(&rest[1..1 + closing]);
            rest = &rest[closing + 2..];
        }
        if argument.contains(&b'"') || argument.contains(&0) {
            return Err(Malformed::DoubleQuote);
        }
        if let Some(&next) = rest.first() {
            if !is_blank(next) {
                return Err(Malformed::Unquoted(next));
            }
        }
        arguments.push(argument);
    }
    Ok((name.to_vec(), arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Result<Vec<String>, Malformed> {
        let (name, arguments) = split(line.as_bytes())?;
        Ok(std::iter::once(name)
            .chain(arguments)
            .map(|word| String::from_utf8(word).unwrap())
            .collect())
    }

    /// What kpathsea writes, as TeX Live's own `shell_cmd_is_allowed` wrote it in a harness.
    #[test]
    fn reads_what_kpathsea_writes() {
        assert_eq!(
            words("kpsewhich '-var-value=TEXMFHOME'").unwrap(),
            ["kpsewhich", "-var-value=TEXMFHOME"]
        );
        assert_eq!(
            words("kpsewhich '--progname=dvipdfm' '--format=''other text files' 'config'").unwrap(),
            [
                "kpsewhich",
                "--progname=dvipdfm",
                "--format=other text files",
                "config"
            ]
        );
        assert_eq!(words("kpsewhich ''").unwrap(), ["kpsewhich", ""]);
        assert_eq!(
            words("kpsewhich   'a'\t'b'  ").unwrap(),
            ["kpsewhich", "a", "b"]
        );
        assert_eq!(words("kpsewhich").unwrap(), ["kpsewhich"]);
        assert_eq!(
            words("latexminted 'config'  '--timestamp' '20250309123456Z' '0CC175B9C0F1B6A831C399E269772661'")
                .unwrap(),
            ["latexminted", "config", "--timestamp", "20250309123456Z", "0CC175B9C0F1B6A831C399E269772661"]
        );
        // Inside the quotes, a shell's metacharacters are letters.
        assert_eq!(
            words("kpsewhich '$(id);`id`|x&y>z\n'").unwrap(),
            ["kpsewhich", "$(id);`id`|x&y>z\n"]
        );
    }

    #[test]
    fn refuses_what_kpathsea_never_writes() {
        for (line, why) in [
            ("", Malformed::Empty),
            ("  kpsewhich 'a'", Malformed::Empty),
            ("kpsewhich a", Malformed::Unquoted(b'a')),
            ("kpsewhich 'a", Malformed::Unterminated),
            ("kpsewhich'a'", Malformed::Name),
            ("\"kpsewhich\" 'a'", Malformed::Name),
            ("kpsewhich 'a' ; rm x", Malformed::Unquoted(b';')),
            ("kpsewhich 'a';rm", Malformed::Unquoted(b';')),
            ("kpsewhich 'a'\n'b'", Malformed::Unquoted(b'\n')),
            ("kpsewhich 'a' $(id)", Malformed::Unquoted(b'$')),
            ("kpsewhich 'a' `id`", Malformed::Unquoted(b'`')),
            ("kpsewhich 'a' | sh", Malformed::Unquoted(b'|')),
            ("kpsewhich 'a' > out", Malformed::Unquoted(b'>')),
            ("kpsewhich 'a' & x", Malformed::Unquoted(b'&')),
            ("kpsewhich 'a\"b'", Malformed::DoubleQuote),
            ("kpsewhich \\'a'", Malformed::Unquoted(b'\\')),
        ] {
            assert_eq!(words(line), Err(why), "{line:?}");
        }
        assert!(split(b"kpsewhich 'a\0b'").is_err());
    }
}
