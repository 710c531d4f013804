//! The bootstrap every function runs, found under `target/lambda` and read from the file: its
//! size, architecture and whether it is stripped.

use std::path::{Path, PathBuf};

/// The bin every function runs (`functions/`): `target/lambda/likes/bootstrap`.
pub const BOOTSTRAP: &str = "likes";

/// What `target/lambda/likes/bootstrap` is, read from the file.
pub struct Bootstrap {
    pub bytes: u64,
    pub arch: &'static str,
    pub stripped: bool,
}

impl Bootstrap {
    pub fn inspect(lambda_dir: &Path) -> Self {
        let path = lambda_dir.join(BOOTSTRAP).join("bootstrap");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; `make bench-cold-start` builds it first",
                path.display()
            )
        });
        let sections = section_names(&bytes)
            .unwrap_or_else(|| panic!("{} is not a 64-bit ELF file", path.display()));
        let has = |name: &str| sections.iter().any(|s| s == name);
        assert!(
            !has(".debug_info"),
            "{} is a debug build (make build-native); `make bench-cold-start` builds release bootstraps first",
            path.display()
        );
        // e_machine, at offset 18 of the ELF header.
        let arch = match bytes[18..20] {
            [0x3e, 0] => "x86_64",
            [0xb7, 0] => "aarch64",
            _ => "unknown",
        };
        Self {
            bytes: bytes.len() as u64,
            arch,
            stripped: !has(".symtab"),
        }
    }
}

/// The section names of a little-endian ELF64 file, from its section header table.
fn section_names(elf: &[u8]) -> Option<Vec<String>> {
    let u16_at = |at: usize| Some(u16::from_le_bytes(elf.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(elf.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(elf.get(at..at + 8)?.try_into().ok()?));
    // "\x7fELF", ELFCLASS64, ELFDATA2LSB.
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let table = u64_at(0x28)? as usize;
    let entry = usize::from(u16_at(0x3a)?);
    let count = usize::from(u16_at(0x3c)?);
    let header = |index: usize| table + index * entry;
    let names = header(usize::from(u16_at(0x3e)?));
    let names = elf.get(u64_at(names + 0x18)? as usize..)?;
    (0..count)
        .map(|index| {
            let name = names.get(u32_at(header(index))? as usize..)?;
            let end = name.iter().position(|&b| b == 0)?;
            Some(String::from_utf8_lossy(&name[..end]).into_owned())
        })
        .collect()
}

pub fn lambda_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("lambda")
}
