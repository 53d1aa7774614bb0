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
    /// `.c` (and `.h`, unless it reads as C++)
    C,
    /// `.cc` `.cpp` `.cxx` `.c++` `.hpp` `.hh` `.hxx` `.h++` (and C++ `.h`)
    Cpp,
    /// `.cs`
    CSharp,
    /// `.rb` `.rake` `.gemspec`, `Rakefile`, `Gemfile`
    Ruby,
    /// `.php`
    Php,
    /// `.sh` `.bash`
    Bash,
    /// `.kt` `.kts`
    Kotlin,
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
    /// Members that are data (fields, constants): they join the class
    /// header, and at any level they merge with their neighbours like
    /// comments do, not like definitions (see `code::Ctx::merge_small`).
    pub fields: &'static [&'static str],
    /// Body nodes whose children are members of the enclosing body.
    pub flatten: &'static [&'static str],
    /// Wrappers whose contents are chunked as if they stood in the
    /// wrapper's place, at any level: namespaces, `extern "C" { … }`,
    /// `#ifndef` guards. The contents are the `body` field's children, else
    /// the children that fill no field (or the `alternative` of an `#if`);
    /// a wrapper with no contents (`namespace A;`) stays a node.
    pub transparent: &'static [&'static str],
    /// Where a grammar has no `body` field: the child kinds that are a
    /// definition's body (Kotlin's `class_body`, `block`).
    pub bodies: &'static [&'static str],
    /// How definitions are named: by their `name` field alone (the first
    /// seven languages, with a few rules of their own), or also through
    /// `declarator` fields and the `name_via` kinds.
    pub names: NameRule,
    /// With [`NameRule::Declarators`]: child kinds that lead to a name
    /// (`variable_declaration` in `val x = 1`); in such a node without a
    /// `name` field, the first named child is the name.
    pub name_via: &'static [&'static str],
    /// With [`NameRule::Declarators`]: kinds that are never named, though
    /// they have a `name` field (a shell `command`'s name is the program).
    pub unnamed: &'static [&'static str],
}

/// How the code chunker finds a definition's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// The `name` field, and the rules of `code::Ctx::definition_name`.
    Fields,
    /// The `name` field, else down `declarator` fields (C's
    /// `int *f(void)`: `pointer_declarator` → `function_declarator` →
    /// `f`) and through `name_via` kinds. A C++ `A::f` is named `f` with
    /// `A` as its qualifier.
    Declarators,
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
            CodeLanguage::C => "c",
            CodeLanguage::Cpp => "cpp",
            CodeLanguage::CSharp => "csharp",
            CodeLanguage::Ruby => "ruby",
            CodeLanguage::Php => "php",
            CodeLanguage::Bash => "shell",
            CodeLanguage::Kotlin => "kotlin",
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
            CodeLanguage::C => tree_sitter_c::LANGUAGE.into(),
            CodeLanguage::Cpp => tree_sitter_cpp::LANGUAGE.into(),
            CodeLanguage::CSharp => tree_sitter_c_sharp::LANGUAGE.into(),
            CodeLanguage::Ruby => tree_sitter_ruby::LANGUAGE.into(),
            CodeLanguage::Php => tree_sitter_php::LANGUAGE_PHP.into(),
            CodeLanguage::Bash => tree_sitter_bash::LANGUAGE.into(),
            CodeLanguage::Kotlin => tree_sitter_kotlin_ng::LANGUAGE.into(),
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
            CodeLanguage::C => &C,
            CodeLanguage::Cpp => &CPP,
            CodeLanguage::CSharp => &CSHARP,
            CodeLanguage::Ruby => &RUBY,
            CodeLanguage::Php => &PHP,
            CodeLanguage::Bash => &BASH,
            CodeLanguage::Kotlin => &KOTLIN,
        }
    }

    /// All languages, for tests and benchmarks.
    pub const ALL: [CodeLanguage; 14] = [
        CodeLanguage::Java,
        CodeLanguage::TypeScript,
        CodeLanguage::Tsx,
        CodeLanguage::JavaScript,
        CodeLanguage::Python,
        CodeLanguage::Rust,
        CodeLanguage::Go,
        CodeLanguage::C,
        CodeLanguage::Cpp,
        CodeLanguage::CSharp,
        CodeLanguage::Ruby,
        CodeLanguage::Php,
        CodeLanguage::Bash,
        CodeLanguage::Kotlin,
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
    transparent: &[],
    bodies: &[],
    names: NameRule::Fields,
    name_via: &[],
    unnamed: &[],
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
    transparent: &[],
    bodies: &[],
    names: NameRule::Fields,
    name_via: &[],
    unnamed: &[],
};

static JAVASCRIPT: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &["import_statement", "decorator"],
    containers: &["class_declaration", "class"],
    fields: &["field_definition"],
    flatten: &[],
    transparent: &[],
    bodies: &[],
    names: NameRule::Fields,
    name_via: &[],
    unnamed: &[],
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
    transparent: &[],
    bodies: &[],
    names: NameRule::Fields,
    name_via: &[],
    unnamed: &[],
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
    transparent: &[],
    bodies: &[],
    names: NameRule::Fields,
    name_via: &[],
    unnamed: &[],
};

static GO: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &["package_clause", "import_declaration"],
    containers: &[],
    fields: &["const_declaration", "var_declaration"],
    flatten: &[],
    transparent: &[],
    bodies: &[],
    names: NameRule::Fields,
    name_via: &[],
    unnamed: &[],
};

/// `#if`/`#ifdef` blocks: their contents are chunked in their place.
const PREPROC_IF: &[&str] = &[
    "preproc_if",
    "preproc_ifdef",
    "preproc_else",
    "preproc_elif",
    "preproc_elifdef",
];

static C: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &["preproc_include"],
    containers: &["struct_specifier", "union_specifier", "enum_specifier"],
    fields: &["field_declaration", "enumerator"],
    flatten: &[],
    transparent: PREPROC_IF,
    bodies: &[],
    names: NameRule::Declarators,
    name_via: &[],
    unnamed: &[],
};

static CPP: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &["preproc_include", "access_specifier"],
    containers: &[
        "class_specifier",
        "struct_specifier",
        "union_specifier",
        "enum_specifier",
    ],
    fields: &[
        "field_declaration",
        "enumerator",
        "alias_declaration",
        "using_declaration",
        "type_definition",
        "static_assert_declaration",
    ],
    flatten: &[],
    transparent: &[
        "namespace_definition",
        "linkage_specification",
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
    ],
    bodies: &[],
    names: NameRule::Declarators,
    name_via: &[],
    unnamed: &[],
};

static CSHARP: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &[
        "using_directive",
        "extern_alias_directive",
        "file_scoped_namespace_declaration",
        "global_attribute",
    ],
    containers: &[
        "class_declaration",
        "struct_declaration",
        "interface_declaration",
        "record_declaration",
        "enum_declaration",
    ],
    fields: &[
        "field_declaration",
        "event_field_declaration",
        "property_declaration",
        "enum_member_declaration",
    ],
    flatten: &[],
    transparent: &["namespace_declaration"],
    bodies: &[],
    names: NameRule::Declarators,
    name_via: &["variable_declaration", "variable_declarator"],
    unnamed: &[],
};

static RUBY: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &[],
    containers: &["class", "module", "singleton_class"],
    fields: &["call", "assignment", "identifier"],
    flatten: &[],
    transparent: &[],
    bodies: &[],
    names: NameRule::Declarators,
    name_via: &[],
    unnamed: &[],
};

static PHP: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &[
        "php_tag",
        "declare_statement",
        "namespace_definition",
        "namespace_use_declaration",
    ],
    containers: &[
        "class_declaration",
        "interface_declaration",
        "trait_declaration",
        "enum_declaration",
    ],
    fields: &[
        "property_declaration",
        "const_declaration",
        "use_declaration",
        "enum_case",
    ],
    flatten: &[],
    transparent: &["namespace_definition"],
    bodies: &[],
    names: NameRule::Declarators,
    name_via: &["property_element", "const_element"],
    unnamed: &[],
};

static BASH: LanguageSpec = LanguageSpec {
    comments: &["comment"],
    attach_forward: &[],
    containers: &[],
    // Data, not a definition: `X=1` merges with its neighbours.
    fields: &["variable_assignment"],
    flatten: &[],
    transparent: &[],
    bodies: &[],
    names: NameRule::Declarators,
    name_via: &[],
    unnamed: &["command"],
};

static KOTLIN: LanguageSpec = LanguageSpec {
    comments: &["line_comment", "block_comment"],
    attach_forward: &["package_header", "import", "import_list", "file_annotation"],
    containers: &[
        "class_declaration",
        "object_declaration",
        "companion_object",
    ],
    fields: &["property_declaration", "enum_entry"],
    flatten: &[],
    transparent: &[],
    bodies: &["class_body", "enum_class_body", "block"],
    names: NameRule::Declarators,
    name_via: &["variable_declaration"],
    unnamed: &[],
};
