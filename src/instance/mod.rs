//! Instance files: the data and the initial state a run used, as named arrays.
//!
//! An instance is a set of named `f64` arrays (row-major, like numpy's default) — tokens, labels,
//! decoders, teachers, initial weights. One format serves every model family:
//!
//! - **`.npz`**, as numpy writes it in one line: `np.savez("mine.npz", X=X, y=y, u=u)`. Integer,
//!   unsigned, boolean and float arrays of any byte order are read (converted to `f64`);
//!   Fortran-ordered arrays are transposed to row-major. Compressed archives
//!   (`np.savez_compressed`) are read too.
//! - **`.json`**, as a second reader: an object of name → number or nested lists of numbers,
//!   e.g. `{"X": [[[1, 0], [0, 1]]], "y": [1], "u": [1, -1]}`.
//!
//! Every run writes the `instance.npz` it used (through [`Arrays::to_npz_bytes`], byte-identical
//! for the same arrays: entries sorted by name, stored uncompressed, fixed timestamps), and feeding
//! that file back as `data_file`/`init_file` reproduces the run.
//!
//! Errors name the array (the *key*: `X`, or `X[3, 1, 0]` for one entry) and the reason; the
//! scenario layer adds the file and turns them into exit code 2. Each family's layout — which
//! arrays, which shapes, which assumptions (separability, an optimal token, …) — is a type
//! implementing [`InstanceFile`] in this module's submodules.

pub mod diagonal;
pub mod kq;
pub mod token_select;

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::path::Path;

/// One array: its shape and its entries in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl Array {
    /// An array of `shape` holding `data` (row-major). Panics if the sizes disagree: that is a
    /// programming error, not bad input.
    pub fn new(shape: &[usize], data: Vec<f64>) -> Self {
        assert_eq!(
            shape.iter().product::<usize>(),
            data.len(),
            "array of shape {shape:?} needs {} entries, got {}",
            shape.iter().product::<usize>(),
            data.len()
        );
        Array {
            shape: shape.to_vec(),
            data,
        }
    }
    pub fn scalar(x: f64) -> Self {
        Array::new(&[], vec![x])
    }
    pub fn vector(v: &[f64]) -> Self {
        Array::new(&[v.len()], v.to_vec())
    }
    /// A `rows × cols` matrix from its entries in row-major order.
    pub fn matrix(rows: usize, cols: usize, row_major: Vec<f64>) -> Self {
        Array::new(&[rows, cols], row_major)
    }
    /// A `rows × cols` matrix from nalgebra's column-major storage.
    pub fn from_column_major(rows: usize, cols: usize, col_major: &[f64]) -> Self {
        let mut data = vec![0.0; rows * cols];
        for j in 0..cols {
            for i in 0..rows {
                data[i * cols + j] = col_major[j * rows + i];
            }
        }
        Array::new(&[rows, cols], data)
    }
    /// The entries of a matrix in column-major order (nalgebra's storage).
    pub fn to_column_major(&self) -> Vec<f64> {
        let (rows, cols) = (self.shape[0], self.shape[1]);
        let mut out = vec![0.0; rows * cols];
        for i in 0..rows {
            for j in 0..cols {
                out[j * rows + i] = self.data[i * cols + j];
            }
        }
        out
    }
    /// The multi-index of flat position `k` (for messages: `X[3, 1, 0]`).
    fn index_of(&self, mut k: usize) -> Vec<usize> {
        let mut idx = vec![0; self.shape.len()];
        for (d, &n) in self.shape.iter().enumerate().rev() {
            idx[d] = k % n.max(1);
            k /= n.max(1);
        }
        idx
    }
}

/// Bad instance data: the array (or entry) and the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct InstanceError {
    /// `X`, `X[3, 1, 0]`, or `(file)` when the file itself cannot be read.
    pub key: String,
    pub reason: String,
}

impl InstanceError {
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        InstanceError {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

/// The token arrays shared by the softmax-attention families (seeds 001 and 003): `X` (n, T, d)
/// with n ≥ 1 and T ≥ 2, labels `y` (n,) of ±1, decoder `u` (d,), optional queries `z` (n, d)
/// (default: each sequence's first token). Returns the data and the decoder.
pub fn read_tokens(a: &Arrays) -> Result<(crate::attention::TokenData, Vec<f64>), InstanceError> {
    let x = a.shaped("X", &[None, None, None])?;
    let (n, t, d) = (x.shape[0], x.shape[1], x.shape[2]);
    if n == 0 || t < 2 || d == 0 {
        return Err(InstanceError::new(
            "X",
            format!(
                "needs n ≥ 1 sequences of T ≥ 2 tokens in d ≥ 1 dimensions, got shape {:?}",
                x.shape
            ),
        ));
    }
    let y = a.labels("y", Some(n))?.to_vec();
    let u = a.vector("u", Some(d))?.to_vec();
    let queries = match a.get("z") {
        Some(_) => a.shaped("z", &[Some(n), Some(d)])?.data.clone(),
        None => (0..n)
            .flat_map(|i| x.data[i * t * d..i * t * d + d].to_vec())
            .collect(),
    };
    let data = crate::attention::TokenData::with_queries(n, t, d, x.data.clone(), y, queries)
        .map_err(|e| InstanceError::new("X", e.to_string()))?;
    Ok((data, u))
}

/// A family's instance layout: which arrays, in which shapes, under which assumptions.
pub trait InstanceFile: Sized {
    /// The arrays this family reads: (name, what it holds and its shape). Optional ones say so.
    const ARRAYS: &'static [(&'static str, &'static str)];
    /// Reads and validates (shapes, finiteness, the family's assumptions).
    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError>;
    /// The arrays that [`InstanceFile::from_arrays`] reads back to an equal instance.
    fn to_arrays(&self) -> Arrays;
}

/// A set of named arrays: what an instance file holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Arrays {
    entries: BTreeMap<String, Array>,
}

impl Arrays {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) an array.
    pub fn insert(&mut self, name: &str, array: Array) -> &mut Self {
        self.entries.insert(name.to_string(), array);
        self
    }

    /// Adds every array of `other` under `prefix` + its name (e.g. `init_` + `W`).
    pub fn merge_prefixed(&mut self, prefix: &str, other: Arrays) -> &mut Self {
        for (name, a) in other.entries {
            self.entries.insert(format!("{prefix}{name}"), a);
        }
        self
    }

    pub fn get(&self, name: &str) -> Option<&Array> {
        self.entries.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Array)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The array `name`, or an error listing what the file holds.
    pub fn require(&self, name: &str) -> Result<&Array, InstanceError> {
        self.get(name).ok_or_else(|| {
            let have: Vec<&str> = self.names().collect();
            InstanceError::new(
                name,
                format!(
                    "missing (the file holds {})",
                    if have.is_empty() {
                        "no arrays".to_string()
                    } else {
                        have.join(", ")
                    }
                ),
            )
        })
    }

    /// The array `name` with `expected.len()` dimensions; `Some(n)` entries of `expected` must
    /// match, `None` entries are free. Returns the actual shape.
    pub fn shaped(&self, name: &str, expected: &[Option<usize>]) -> Result<&Array, InstanceError> {
        let a = self.require(name)?;
        let describe = || {
            let dims: Vec<String> = expected
                .iter()
                .map(|d| d.map_or("any".into(), |n| n.to_string()))
                .collect();
            format!("({})", dims.join(", "))
        };
        if a.shape.len() != expected.len() {
            return Err(InstanceError::new(
                name,
                format!(
                    "expected {} dimension(s) {}, got shape {:?}",
                    expected.len(),
                    describe(),
                    a.shape
                ),
            ));
        }
        if let Some((axis, want)) = expected
            .iter()
            .enumerate()
            .find_map(|(i, d)| d.filter(|&n| n != a.shape[i]).map(|n| (i, n)))
        {
            return Err(InstanceError::new(
                name,
                format!(
                    "expected shape {}, got {:?} (axis {axis} should be {want})",
                    describe(),
                    a.shape
                ),
            ));
        }
        Ok(a)
    }

    /// A vector of length `len` (any length if `None`).
    pub fn vector(&self, name: &str, len: Option<usize>) -> Result<&[f64], InstanceError> {
        Ok(&self.shaped(name, &[len])?.data)
    }

    /// A scalar (a 0-dimensional array, or an array with exactly one entry).
    pub fn scalar(&self, name: &str) -> Result<f64, InstanceError> {
        let a = self.require(name)?;
        match a.data.as_slice() {
            [x] => Ok(*x),
            _ => Err(InstanceError::new(
                name,
                format!("expected a single number, got shape {:?}", a.shape),
            )),
        }
    }

    /// Labels in {−1, +1}.
    pub fn labels(&self, name: &str, len: Option<usize>) -> Result<&[f64], InstanceError> {
        let y = self.vector(name, len)?;
        match y.iter().position(|&v| v != 1.0 && v != -1.0) {
            Some(i) => Err(InstanceError::new(
                format!("{name}[{i}]"),
                format!("labels must be +1 or -1, got {}", y[i]),
            )),
            None => Ok(y),
        }
    }

    /// Refuses arrays not named in `known` (a misspelt name would otherwise be ignored).
    pub fn deny_unknown(&self, known: &[&str]) -> Result<(), InstanceError> {
        match self.names().find(|n| !known.contains(n)) {
            Some(n) => Err(InstanceError::new(
                n,
                format!("unknown array (expected {})", known.join(", ")),
            )),
            None => Ok(()),
        }
    }

    /// Refuses NaN and infinities, naming the first entry that is not finite.
    pub fn check_finite(&self) -> Result<(), InstanceError> {
        for (name, a) in &self.entries {
            if let Some(k) = a.data.iter().position(|x| !x.is_finite()) {
                let idx: Vec<String> = a.index_of(k).iter().map(usize::to_string).collect();
                let key = if idx.is_empty() {
                    name.clone()
                } else {
                    format!("{name}[{}]", idx.join(", "))
                };
                return Err(InstanceError::new(
                    key,
                    format!("not finite ({})", a.data[k]),
                ));
            }
        }
        Ok(())
    }

    /// Reads an instance file by its extension (`.npz` or `.json`) and refuses non-finite entries.
    pub fn read(path: &Path) -> Result<Arrays, InstanceError> {
        let bytes = std::fs::read(path)
            .map_err(|e| InstanceError::new("(file)", format!("cannot read: {e}")))?;
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        let arrays = match ext.as_deref() {
            Some("npz") => Self::from_npz_bytes(&bytes)?,
            Some("json") => Self::from_json_str(
                std::str::from_utf8(&bytes)
                    .map_err(|e| InstanceError::new("(file)", format!("not UTF-8 text: {e}")))?,
            )?,
            _ => {
                return Err(InstanceError::new(
                    "(file)",
                    "an instance file must end in .npz (np.savez) or .json",
                ))
            }
        };
        arrays.check_finite()?;
        Ok(arrays)
    }

    /// How many numbers the instance file at `path` holds, without reading them: the shapes in
    /// the `.npy` headers of an `.npz` (nothing is decompressed past a header), or for `.json` an
    /// upper bound from its length (every number takes at least one digit and one separator).
    /// What the size limits count before a file is read (see [`crate::scenario::cost`]).
    pub fn count_numbers(path: &Path) -> Result<f64, InstanceError> {
        let cannot =
            |e: &dyn std::fmt::Display| InstanceError::new("(file)", format!("cannot read: {e}"));
        let file = std::fs::File::open(path).map_err(|e| cannot(&e))?;
        let is_npz = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npz"));
        if !is_npz {
            let bytes = file.metadata().map_err(|e| cannot(&e))?.len();
            return Ok(bytes as f64 / 2.0);
        }
        let mut zip =
            zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| cannot(&e))?;
        let mut count = 0.0;
        for i in 0..zip.len() {
            let entry = zip.by_index(i).map_err(|e| cannot(&e))?;
            let header = npyz::NpyFile::new(entry).map_err(|e| cannot(&e))?;
            count += header.shape().iter().map(|&n| n as f64).product::<f64>();
        }
        Ok(count)
    }

    /// Parses an `.npz` archive (numpy's `savez` or `savez_compressed`).
    pub fn from_npz_bytes(bytes: &[u8]) -> Result<Arrays, InstanceError> {
        let not_npz = |e: &dyn std::fmt::Display| {
            InstanceError::new("(file)", format!("not an .npz archive: {e}"))
        };
        let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| not_npz(&e))?;
        let mut arrays = Arrays::new();
        for i in 0..zip.len() {
            let mut file = zip.by_index(i).map_err(|e| not_npz(&e))?;
            let file_name = file.name().map_err(|e| not_npz(&e))?.to_string();
            let Some(name) = npyz::npz::array_name_from_file_name(&file_name).map(str::to_string)
            else {
                continue;
            };
            let mut npy = Vec::with_capacity(file.size() as usize);
            file.read_to_end(&mut npy)
                .map_err(|e| InstanceError::new(&name, format!("cannot decompress: {e}")))?;
            let array = read_npy(&npy).map_err(|reason| InstanceError::new(&name, reason))?;
            arrays.insert(&name, array);
        }
        Ok(arrays)
    }

    /// Parses the JSON form: an object of name → number or nested lists of numbers.
    pub fn from_json_str(text: &str) -> Result<Arrays, InstanceError> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| InstanceError::new("(file)", format!("not valid JSON: {e}")))?;
        let serde_json::Value::Object(map) = value else {
            return Err(InstanceError::new(
                "(top level)",
                "expected an object of name → array",
            ));
        };
        let mut arrays = Arrays::new();
        for (name, v) in map {
            let mut shape = Vec::new();
            let mut probe = &v;
            while let serde_json::Value::Array(items) = probe {
                shape.push(items.len());
                match items.first() {
                    Some(first) => probe = first,
                    None => break,
                }
            }
            let mut data = Vec::with_capacity(shape.iter().product());
            flatten_json(&v, &shape, &name, &mut data)?;
            arrays.insert(&name, Array::new(&shape, data));
        }
        Ok(arrays)
    }

    /// The `.npz` bytes: one little-endian `f64` `.npy` per array, sorted by name, stored
    /// uncompressed with fixed timestamps, so equal arrays give equal bytes. `np.load` reads it.
    pub fn to_npz_bytes(&self) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .last_modified_time(zip::DateTime::default())
            .large_file(false);
        for (name, a) in &self.entries {
            let shape: Vec<u64> = a.shape.iter().map(|&n| n as u64).collect();
            let mut npy = Vec::new();
            {
                use npyz::WriterBuilder;
                let mut w = npyz::WriteOptions::<f64>::new()
                    .default_dtype()
                    .shape(&shape)
                    .writer(&mut npy)
                    .begin_nd()
                    .expect("writing .npy into memory");
                w.extend(a.data.iter().copied())
                    .expect("writing .npy into memory");
                w.finish().expect("writing .npy into memory");
            }
            zip.start_file(npyz::npz::file_name_from_array_name(name), options)
                .expect("writing .npz into memory");
            zip.write_all(&npy).expect("writing .npz into memory");
        }
        zip.finish().expect("writing .npz into memory").into_inner()
    }
}

/// Reads one `.npy` of a plain numeric dtype into row-major `f64`.
fn read_npy(bytes: &[u8]) -> Result<Array, String> {
    use npyz::{DType, NpyFile, Order, TypeChar};
    let npy = NpyFile::new(bytes).map_err(|e| format!("not a .npy array: {e}"))?;
    let shape: Vec<usize> = npy.shape().iter().map(|&n| n as usize).collect();
    let order = npy.order();
    let DType::Plain(ts) = npy.dtype() else {
        return Err(format!(
            "structured dtype {} is not supported (use numbers)",
            npy.dtype().descr()
        ));
    };
    let descr = npy.dtype().descr();
    let data: Vec<f64> = match (ts.type_char(), ts.size_field()) {
        (TypeChar::Float, 8) => npy.into_vec::<f64>().map_err(|e| e.to_string())?,
        (TypeChar::Float, 4) => convert(npy.into_vec::<f32>(), |x| x as f64)?,
        (TypeChar::Int, 1) => convert(npy.into_vec::<i8>(), f64::from)?,
        (TypeChar::Int, 2) => convert(npy.into_vec::<i16>(), f64::from)?,
        (TypeChar::Int, 4) => convert(npy.into_vec::<i32>(), f64::from)?,
        (TypeChar::Int, 8) => convert(npy.into_vec::<i64>(), |x| x as f64)?,
        (TypeChar::Uint, 1) => convert(npy.into_vec::<u8>(), f64::from)?,
        (TypeChar::Uint, 2) => convert(npy.into_vec::<u16>(), f64::from)?,
        (TypeChar::Uint, 4) => convert(npy.into_vec::<u32>(), f64::from)?,
        (TypeChar::Uint, 8) => convert(npy.into_vec::<u64>(), |x| x as f64)?,
        (TypeChar::Bool, 1) => convert(npy.into_vec::<bool>(), |b| if b { 1.0 } else { 0.0 })?,
        _ => {
            return Err(format!(
                "dtype {descr} is not supported (use float, integer or bool arrays)"
            ))
        }
    };
    if data.len() != shape.iter().product::<usize>() {
        return Err(format!("holds {} entries for shape {shape:?}", data.len()));
    }
    let data = match order {
        Order::C => data,
        Order::Fortran => fortran_to_c(&shape, &data),
    };
    Ok(Array { shape, data })
}

fn convert<T>(v: std::io::Result<Vec<T>>, f: impl Fn(T) -> f64) -> Result<Vec<f64>, String> {
    Ok(v.map_err(|e| e.to_string())?.into_iter().map(f).collect())
}

/// Column-major (Fortran) entries to row-major.
fn fortran_to_c(shape: &[usize], data: &[f64]) -> Vec<f64> {
    let n = data.len();
    let mut out = vec![0.0; n];
    let mut idx = vec![0usize; shape.len()];
    for &x in data {
        // Fortran order: the first index varies fastest
        let mut k = 0;
        for (d, &i) in idx.iter().enumerate() {
            k = k * shape[d] + i;
        }
        out[k] = x;
        for (d, i) in idx.iter_mut().enumerate() {
            *i += 1;
            if *i < shape[d] {
                break;
            }
            *i = 0;
        }
    }
    out
}

/// Flattens nested JSON lists of the given (rectangular) shape, naming the first ragged or
/// non-numeric entry.
fn flatten_json(
    v: &serde_json::Value,
    shape: &[usize],
    key: &str,
    out: &mut Vec<f64>,
) -> Result<(), InstanceError> {
    match (v, shape.split_first()) {
        (serde_json::Value::Number(n), None) => {
            out.push(n.as_f64().unwrap_or(f64::NAN));
            Ok(())
        }
        (serde_json::Value::Array(items), Some((&len, rest))) if items.len() == len => items
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| flatten_json(x, rest, &format!("{key}[{i}]"), out)),
        (serde_json::Value::Array(items), Some((&len, _))) => Err(InstanceError::new(
            key,
            format!(
                "ragged: {} entries where its siblings have {len}",
                items.len()
            ),
        )),
        (serde_json::Value::Array(_), None) => Err(InstanceError::new(
            key,
            "a list where its siblings hold numbers",
        )),
        (other, _) => Err(InstanceError::new(
            key,
            format!("expected a number or a list of numbers, got {other}"),
        )),
    }
}

pub mod prompt;

#[cfg(test)]
mod tests;

pub mod histogram;

/// The `instance.npz` of a run over several datasets: one dataset's arrays as they are (so the
/// file feeds back as `data_file`), several under `<dataset>_` (e.g. `toy2b_X`).
pub fn run_instance(datasets: Vec<(String, Arrays)>) -> Arrays {
    match <[_; 1]>::try_from(datasets) {
        Ok([(_, one)]) => one,
        Err(several) => {
            let mut all = Arrays::new();
            for (label, arrays) in several {
                all.merge_prefixed(&format!("{label}_"), arrays);
            }
            all
        }
    }
}
