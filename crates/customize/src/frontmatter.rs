//! A Markdown customization file: its frontmatter (between `---` lines at
//! the top, in the YAML subset of `yaml.rs`) and its body, the text that
//! reaches the model. Fields are read by name with their type checked, so a
//! file with one bad field says which.

use super::yaml::{self, Mapping, Value, YamlError};

/// A file split into its frontmatter (absent when it has none) and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Document {
    pub fields: Option<Fields>,
    pub body: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FrontmatterError {
    #[error("not UTF-8 text")]
    NotUtf8,
    #[error("the frontmatter has no closing `---` line")]
    Unclosed,
    #[error("malformed frontmatter: {0}")]
    Yaml(#[from] YamlError),
}

/// `bytes` split; a file that opens a frontmatter must close it and hold a
/// mapping in it.
pub(crate) fn split(bytes: &[u8]) -> Result<Document, FrontmatterError> {
    let text = std::str::from_utf8(bytes).map_err(|_| FrontmatterError::NotUtf8)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let opens = lines.next().is_some_and(|l| l.trim_end() == "---");
    if !opens {
        return Ok(Document {
            fields: None,
            body: text.to_owned(),
        });
    }
    let start = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut at = start;
    for line in lines {
        if matches!(line.trim_end(), "---" | "...") {
            let mapping = yaml::parse(&text[start..at])?;
            return Ok(Document {
                fields: Some(Fields(mapping)),
                body: text[at + line.len()..].to_owned(),
            });
        }
        at += line.len();
    }
    Err(FrontmatterError::Unclosed)
}

/// Why a field cannot be read: it has another type than its key needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct FieldError(pub String);

/// The frontmatter's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fields(Mapping);

impl Fields {
    /// The value under the first of `keys` present (files spell some keys
    /// two ways: `disable-model-invocation`, `disableModelInvocation`).
    fn get(&self, keys: &[&str]) -> Option<(&str, &Value)> {
        keys.iter().find_map(|want| {
            self.0
                .iter()
                .find(|(k, _)| k == want)
                .map(|(k, v)| (k.as_str(), v))
        })
    }

    /// A string field; a list or mapping there is an error.
    pub(crate) fn text(&self, keys: &[&str]) -> Result<Option<String>, FieldError> {
        match self.get(keys) {
            None | Some((_, Value::Null)) => Ok(None),
            Some((_, Value::Scalar { text, .. })) => Ok(Some(text.clone())),
            Some((k, Value::List(_))) => Err(FieldError(format!("`{k}` is a list, not a string"))),
            Some((k, Value::Nested)) => {
                Err(FieldError(format!("`{k}` is a mapping, not a string")))
            }
        }
    }

    /// A `true`/`false` field.
    pub(crate) fn flag(&self, keys: &[&str]) -> Result<Option<bool>, FieldError> {
        let Some(text) = self.text(keys)? else {
            return Ok(None);
        };
        match text.as_str() {
            "true" | "True" | "TRUE" => Ok(Some(true)),
            "false" | "False" | "FALSE" => Ok(Some(false)),
            _ => Err(FieldError(format!(
                "`{}` is {text:?}, not true or false",
                self.get(keys).map_or("", |(k, _)| k)
            ))),
        }
    }

    /// A list field: a YAML list, or a string of comma-separated items (as
    /// `tools: Read, Grep` and `applyTo: "*.ts, *.js"` are written).
    pub(crate) fn list(&self, keys: &[&str]) -> Result<Option<Vec<String>>, FieldError> {
        let items: Vec<String> = match self.get(keys) {
            None | Some((_, Value::Null)) => return Ok(None),
            Some((_, Value::List(items))) => items.clone(),
            Some((_, Value::Scalar { text, .. })) => text.split(',').map(str::to_owned).collect(),
            Some((k, Value::Nested)) => {
                return Err(FieldError(format!("`{k}` is a mapping, not a list")))
            }
        };
        Ok(Some(
            items
                .into_iter()
                .map(|i| i.trim().to_owned())
                .filter(|i| !i.is_empty())
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_splits_into_frontmatter_and_body() {
        let doc = split(b"---\nname: alpha\ndescription: A.\n---\n# Alpha\nbody\n").unwrap();
        let f = doc.fields.unwrap();
        assert_eq!(f.text(&["name"]).unwrap().as_deref(), Some("alpha"));
        assert_eq!(doc.body, "# Alpha\nbody\n");
    }

    #[test]
    fn crlf_a_bom_and_an_empty_frontmatter_are_read() {
        let doc = split("\u{feff}---\r\nname: a\r\n---\r\nbody\r\n".as_bytes()).unwrap();
        assert_eq!(
            doc.fields.unwrap().text(&["name"]).unwrap().as_deref(),
            Some("a")
        );
        assert_eq!(doc.body, "body\r\n");
        let doc = split(b"---\n---\nbody").unwrap();
        assert_eq!(doc.fields, Some(Fields::default()));
        assert_eq!(doc.body, "body");
        let doc = split(b"---\nname: a\n---").unwrap();
        assert_eq!(doc.body, "");
    }

    #[test]
    fn no_frontmatter_is_the_whole_body() {
        let doc = split(b"plain text\n---\nnot: frontmatter\n").unwrap();
        assert_eq!(doc.fields, None);
        assert_eq!(doc.body, "plain text\n---\nnot: frontmatter\n");
    }

    #[test]
    fn bad_files_say_why() {
        assert_eq!(split(b"---\nname: a\n"), Err(FrontmatterError::Unclosed));
        assert_eq!(split(b"\xff\xfe"), Err(FrontmatterError::NotUtf8));
        let err = split(b"---\nname: a\nname: b\n---\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "malformed frontmatter: line 2: the key \"name\" is given twice"
        );
    }

    #[test]
    fn fields_are_read_by_type() {
        let doc = split(
            b"---\ntools: Read, Grep\nlist: [a, b]\nflag: True\nbad: maybe\nmeta:\n  x: y\n---\n",
        )
        .unwrap();
        let f = doc.fields.unwrap();
        assert_eq!(
            f.list(&["tools"]).unwrap(),
            Some(vec!["Read".into(), "Grep".into()])
        );
        assert_eq!(
            f.list(&["list"]).unwrap(),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(f.flag(&["nope", "flag"]).unwrap(), Some(true));
        assert_eq!(
            f.flag(&["bad"]).unwrap_err().0,
            "`bad` is \"maybe\", not true or false"
        );
        assert_eq!(
            f.text(&["list"]).unwrap_err().0,
            "`list` is a list, not a string"
        );
        assert_eq!(
            f.text(&["meta"]).unwrap_err().0,
            "`meta` is a mapping, not a string"
        );
        assert_eq!(
            f.list(&["meta"]).unwrap_err().0,
            "`meta` is a mapping, not a list"
        );
        assert_eq!(f.text(&["absent"]).unwrap(), None);
    }
}
