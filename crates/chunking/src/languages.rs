//! What the code chunker knows about each tree-sitter grammar.

use tree_sitter::Language;

/// The languages chunked with tree-sitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeLanguage {
    /// `.java`
    Java,
    /// `.ts`, `.mts`, `.cts` (and `.d.ts`, as API reference)
    TypeScript,
    /// `.tsx`
    Tsx,
    /// `.js`, `.mjs`, `.cjs`, `.jsx`
    JavaScript,
    /// `.py`, `.pyi`
    Python,
    /// `.rs`
    Rust,
    /// `.go`
    Go,
}

/// Node kinds of one grammar, by the role they play in chunking.
pub(crate) struct LanguageSpec {
    /// Comment nodes: they belong to the definition that follows them.
    pub comments: &'static [&'static str],
    /// Other nodes that join the next definition: package and import lines,
    /// attributes and decorators that are siblings of their definition.
    pub attach_forward: &'static [&'static str],
    /// Definitions whose body holds members: split into header + members.
    pub containers: &'static [&'static str],
    /// Members that are data (fields, constants): they join the class header.
    pub fields: &'static [&'static str],
    /// Body nodes whose children are members of the enclosing body.
    pub flatten: &'static [&'static str],
}

impl CodeLanguage {
    /// The `language` name recorded on chunks.
    pub fn name(self) -> &'static str {
        match self {
            CodeLanguage::Java => "java",
            CodeLanguage::TypeScript | CodeLanguage::Tsx => "typescript",
            CodeLanguage::JavaScript => "javascript",
            CodeLanguage::Python => "python",
            CodeLanguage::Rust => "rust",
            CodeLanguage::Go => "go",
        }
    }

    /// The tree-sitter grammar.
    pub fn grammar(self) -> Language {
        match self {
            CodeLanguage::Java => tree_sitter_java::LANGUAGE.into(),
            CodeLanguage::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            CodeLanguage::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            CodeLanguage::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            CodeLanguage::Python => tree_sitter_python::LANGUAGE.into(),
            CodeLanguage::Rust => tree_sitter_rust::LANGUAGE.into(),
            CodeLanguage::Go => tree_sitter_go::LANGUAGE.into(),
        }
    }

    pub(crate) fn spec(self) -> &'static LanguageSpec {
        match self {
            CodeLanguage::Java => &JAVA,
            CodeLanguage::TypeScript | CodeLanguage::Tsx => &TYPESCRIPT,
            CodeLanguage::JavaScript => &JAVASCRIPT,
            CodeLanguage::Python => &PYTHON,
            CodeLanguage::Rust => &RUST,
            CodeLanguage::Go => &GO,
        }
    }

    /// All languages, for tests and benchmarks.
    pub const ALL: [CodeLanguage; 7] = [
        CodeLanguage::Java,
        CodeLanguage::TypeScript,
        CodeLanguage::Tsx,
        CodeLanguage::JavaScript,
        CodeLanguage::Python,
        CodeLanguage::Rust,
        CodeLanguage::Go,
    ];
}

static JAVA: LanguageSpec = LanguageSpec {
    comments: &["line_comment", "block_comment"],
    attach_forward: &["package_declaration", "import_declaration"],
    containers: &[
        "class_declaration",
        "interface_declaration",
        "enum_declaration",
        "record_declaration",
        "annotation_type_declaration",
    ],
    fields: &["field_declaration", "constant_declaration", "enum_constant"],
    flatten: &["enum_body_declarations"],
};

static TYPESCRIPT: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &["import_statement", "decorator"],
    containers: &[
        "class_declaration",
        "abstract_class_declaration",
        "class",
        "interface_declaration",
        "enum_declaration",
        "internal_module",
        "module",
    ],
    fields: &[
        "public_field_definition",
        "property_signature",
        "index_signature",
        "enum_assignment",
        "property_identifier",
    ],
    flatten: &[],
};

static JAVASCRIPT: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &["import_statement", "decorator"],
    containers: &["class_declaration", "class"],
    fields: &["field_definition"],
    flatten: &[],
};

static PYTHON: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &[
        "import_statement",
        "import_from_statement",
        "future_import_statement",
    ],
    containers: &["class_definition"],
    fields: &["expression_statement"],
    flatten: &[],
};

static RUST: LanguageSpec = LanguageSpec {
    comments: &["line_comment", "block_comment"],
    attach_forward: &[
        "attribute_item",
        "inner_attribute_item",
        "use_declaration",
        "extern_crate_declaration",
    ],
    containers: &[
        "impl_item",
        "trait_item",
        "mod_item",
        "struct_item",
        "enum_item",
        "union_item",
    ],
    fields: &[
        "field_declaration",
        "enum_variant",
        "const_item",
        "type_item",
        "associated_type",
    ],
    flatten: &[],
};

static GO: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &["package_clause", "import_declaration"],
    containers: &[],
    fields: &[],
    flatten: &[],
};
