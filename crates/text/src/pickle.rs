//! MLPerf's pickled pandas DataFrames (`open_orca_gpt4_tokenized_llama.sampled_24576.pkl`, the llama3.1 and
//! mixtral `.pkl` datasets), read without Python: a small pickle machine that builds a plain object graph, then
//! an extractor that finds the DataFrame's columns in it.
//!
//! Why not a crate: `serde-pickle` (the maintained one) resolves only builtin globals; with
//! `replace_unresolved_globals` it turns every `REDUCE` of a pandas or numpy class into `None`, which is where a
//! DataFrame keeps all its data, and it has no protocol-5 `BYTEARRAY8`.
//!
//! The machine runs the opcodes of protocols 2 to 5 as `pickle.py`'s `_Unpickler` does, except that it calls
//! nothing: a `REDUCE`/`NEWOBJ` becomes an [`Instance`] holding the callable's name and arguments, and `BUILD`
//! stores the state on it. Out-of-band buffers (`NEXT_BUFFER`) and protocol 0/1 text opcodes are refused.
//!
//! The extractor knows how pandas pickles a DataFrame (`NDFrame.__getstate__`: a dict with `_mgr`):
//! - `BlockManager` by `REDUCE(BlockManager, (blocks, axes))`, each block `_unpickle_block(values, placement,
//!   ndim)` (`pandas/core/internals/managers.py` `BaseBlockManager.__reduce__`; pandas 1.5, 2.0 and 3.1 tested);
//!   the older state form (`__getstate__`'s "0.14.1" dict) is refused;
//! - axes: `_new_Index(cls, {"data": …})` for the columns (an object array, or pandas 3's `StringArray`),
//!   `RangeIndex` or any index for the rows (only its length matters: rows keep file order);
//! - block values: numpy arrays, `_reconstruct` + `BUILD((version, shape, dtype, is_fortran, raw))` (object
//!   arrays carry a list, numeric ones bytes) or, protocol 5, `_frombuffer(bytearray, dtype, shape, order)`.
//!
//! Cells become JSON: str, int, float (NaN → null), bool, None, and lists/tuples/1-D numpy arrays of those
//! (`tok_input`). Anything else — another dtype, a cell of another Python type, an out-of-band buffer — is
//! refused with an error naming the column and what it holds.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::{Map, Number, Value};

/// Why a pickle could not be read as a DataFrame.
#[derive(Debug, thiserror::Error)]
pub enum PickleError {
    #[error("the pickle ends early at byte {at}")]
    Truncated { at: usize },
    #[error(
        "byte {at}: opcode 0x{op:02x} is not one this reader runs (protocol 2-5 pickles only): {what}"
    )]
    Opcode {
        at: usize,
        op: u8,
        what: &'static str,
    },
    #[error("byte {at}: malformed pickle: {problem}")]
    Malformed { at: usize, problem: String },
    #[error("not a pandas DataFrame pickle: {problem}")]
    NotADataFrame { problem: String },
    #[error("column `{column}`: {problem}")]
    Column { column: String, problem: String },
}

/// A Python object as the pickle describes it.
#[derive(Debug, Clone)]
enum Obj {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    Tuple(Rc<[Obj]>),
    List(Rc<RefCell<Vec<Obj>>>),
    Dict(Rc<RefCell<Vec<(Obj, Obj)>>>),
    Global(Rc<(String, String)>),
    Instance(Rc<Instance>),
}

/// What a `REDUCE`/`NEWOBJ` would have built: the callable, its arguments and the `BUILD` state.
#[derive(Debug)]
struct Instance {
    callable: Obj,
    args: Obj,
    state: RefCell<Option<Obj>>,
}

impl Obj {
    fn describe(&self) -> String {
        match self {
            Obj::None => "None".into(),
            Obj::Bool(_) => "bool".into(),
            Obj::Int(_) => "int".into(),
            Obj::Float(_) => "float".into(),
            Obj::Str(_) => "str".into(),
            Obj::Bytes(_) => "bytes".into(),
            Obj::Tuple(_) => "tuple".into(),
            Obj::List(_) => "list".into(),
            Obj::Dict(_) => "dict".into(),
            Obj::Global(g) => format!("{}.{}", g.0, g.1),
            Obj::Instance(i) => format!("an instance of {}", i.callable.describe()),
        }
    }

    /// The `(module, name)` of a global, or of an instance's callable.
    fn global(&self) -> Option<(&str, &str)> {
        match self {
            Obj::Global(g) => Some((g.0.as_str(), g.1.as_str())),
            _ => None,
        }
    }

    fn instance_of(&self, name: &str) -> Option<&Instance> {
        match self {
            Obj::Instance(i) if i.callable.global().is_some_and(|(_, n)| n == name) => Some(i),
            _ => None,
        }
    }

    fn items(&self) -> Option<Vec<Obj>> {
        match self {
            Obj::Tuple(t) => Some(t.to_vec()),
            Obj::List(l) => Some(l.borrow().clone()),
            _ => None,
        }
    }

    fn get(&self, key: &str) -> Option<Obj> {
        match self {
            Obj::Dict(d) => d
                .borrow()
                .iter()
                .find(|(k, _)| matches!(k, Obj::Str(s) if &**s == key))
                .map(|(_, v)| v.clone()),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Obj::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Runs the pickle and returns the object it describes.
fn unpickle(bytes: &[u8]) -> Result<Obj, PickleError> {
    let mut m = Machine {
        bytes,
        at: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    m.run()
}

struct Machine<'a> {
    bytes: &'a [u8],
    at: usize,
    stack: Vec<Obj>,
    marks: Vec<Vec<Obj>>,
    memo: HashMap<u32, Obj>,
}

impl<'a> Machine<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or(PickleError::Truncated { at: self.at })?;
        let bytes: &'a [u8] = self.bytes;
        let slice = &bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn uint(&mut self, n: usize) -> Result<u64, PickleError> {
        let b = self.take(n)?;
        let mut buf = [0u8; 8];
        buf[..n].copy_from_slice(b);
        Ok(u64::from_le_bytes(buf))
    }

    fn len(&mut self, n: usize) -> Result<usize, PickleError> {
        let at = self.at;
        usize::try_from(self.uint(n)?).map_err(|_| PickleError::Truncated { at })
    }

    fn malformed(&self, problem: impl Into<String>) -> PickleError {
        PickleError::Malformed {
            at: self.at,
            problem: problem.into(),
        }
    }

    fn pop(&mut self) -> Result<Obj, PickleError> {
        self.stack
            .pop()
            .ok_or_else(|| self.malformed("pop from an empty stack"))
    }

    fn top(&mut self) -> Result<&mut Obj, PickleError> {
        let at = self.at;
        self.stack.last_mut().ok_or(PickleError::Malformed {
            at,
            problem: "the stack is empty".into(),
        })
    }

    /// Everything pushed since the last MARK, which is dropped.
    fn pop_mark(&mut self) -> Result<Vec<Obj>, PickleError> {
        let previous = self
            .marks
            .pop()
            .ok_or_else(|| self.malformed("no MARK to pop to"))?;
        Ok(std::mem::replace(&mut self.stack, previous))
    }

    fn text(&mut self, n: usize) -> Result<Obj, PickleError> {
        let raw = self.take(n)?;
        let at = self.at;
        let s = std::str::from_utf8(raw).map_err(|e| PickleError::Malformed {
            at,
            problem: format!("a string that is not UTF-8: {e}"),
        })?;
        Ok(Obj::Str(Rc::from(s)))
    }

    fn run(&mut self) -> Result<Obj, PickleError> {
        loop {
            let at = self.at;
            let op = *self.take(1)?.first().ok_or(PickleError::Truncated { at })?;
            match op {
                0x80 => {
                    let protocol = self.uint(1)?;
                    if protocol < 2 {
                        return Err(
                            self.malformed(format!("protocol {protocol}; only 2-5 are read"))
                        );
                    }
                }
                0x95 => {
                    self.uint(8)?;
                }
                b'.' => return self.pop(),
                b'(' => self.marks.push(std::mem::take(&mut self.stack)),
                b')' => self.stack.push(Obj::Tuple(Rc::from(Vec::new()))),
                b']' => self.stack.push(Obj::List(Rc::default())),
                b'}' => self.stack.push(Obj::Dict(Rc::default())),
                0x8f => self.stack.push(Obj::List(Rc::default())),
                0x90 => {
                    let items = self.pop_mark()?;
                    match self.top()? {
                        Obj::List(set) => set.borrow_mut().extend(items),
                        other => {
                            let found = other.describe();
                            return Err(self.malformed(format!("ADDITEMS to {found}")));
                        }
                    }
                }
                0x91 => {
                    let items = self.pop_mark()?;
                    self.stack.push(Obj::List(Rc::new(RefCell::new(items))));
                }
                b'N' => self.stack.push(Obj::None),
                0x88 => self.stack.push(Obj::Bool(true)),
                0x89 => self.stack.push(Obj::Bool(false)),
                b'J' => {
                    let v = self.uint(4)? as u32 as i32;
                    self.stack.push(Obj::Int(i64::from(v)));
                }
                b'K' => {
                    let v = self.uint(1)?;
                    self.stack.push(Obj::Int(v as i64));
                }
                b'M' => {
                    let v = self.uint(2)?;
                    self.stack.push(Obj::Int(v as i64));
                }
                0x8a | 0x8b => {
                    let n = if op == 0x8a {
                        self.len(1)?
                    } else {
                        self.len(4)?
                    };
                    let raw = self.take(n)?.to_vec();
                    if n > 8 {
                        return Err(self.malformed("an integer wider than 64 bits"));
                    }
                    // Two's complement, little-endian, sign-extended from its top byte.
                    let fill = if raw.last().is_some_and(|b| b & 0x80 != 0) {
                        0xff
                    } else {
                        0
                    };
                    let mut buf = [fill; 8];
                    buf[..n].copy_from_slice(&raw);
                    self.stack.push(Obj::Int(i64::from_le_bytes(buf)));
                }
                b'G' => {
                    let raw = self.take(8)?;
                    let mut buf = [0u8; 8];
                    buf.copy_from_slice(raw);
                    self.stack.push(Obj::Float(f64::from_be_bytes(buf)));
                }
                0x8c => {
                    let n = self.len(1)?;
                    let s = self.text(n)?;
                    self.stack.push(s);
                }
                b'X' => {
                    let n = self.len(4)?;
                    let s = self.text(n)?;
                    self.stack.push(s);
                }
                0x8d => {
                    let n = self.len(8)?;
                    let s = self.text(n)?;
                    self.stack.push(s);
                }
                b'C' | b'B' | 0x8e | 0x96 => {
                    let n = match op {
                        b'C' => self.len(1)?,
                        b'B' => self.len(4)?,
                        _ => self.len(8)?,
                    };
                    let raw = self.take(n)?;
                    self.stack.push(Obj::Bytes(Rc::from(raw)));
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.stack.push(Obj::Global(Rc::new((module, name))));
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (module.as_str(), name.as_str()) {
                        (Some(m), Some(n)) => self
                            .stack
                            .push(Obj::Global(Rc::new((m.to_string(), n.to_string())))),
                        _ => return Err(self.malformed("STACK_GLOBAL needs two strings")),
                    }
                }
                b'R' | 0x81 => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    self.stack.push(Obj::Instance(Rc::new(Instance {
                        callable,
                        args,
                        state: RefCell::new(None),
                    })));
                }
                0x92 => {
                    let _kwargs = self.pop()?;
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    self.stack.push(Obj::Instance(Rc::new(Instance {
                        callable,
                        args,
                        state: RefCell::new(None),
                    })));
                }
                b'b' => {
                    let state = self.pop()?;
                    match self.top()? {
                        Obj::Instance(i) => *i.state.borrow_mut() = Some(state),
                        other => {
                            let found = other.describe();
                            return Err(self.malformed(format!("BUILD on {found}")));
                        }
                    }
                }
                0x94 => {
                    let top = self.top()?.clone();
                    let index = self.memo.len() as u32;
                    self.memo.insert(index, top);
                }
                b'q' | b'r' => {
                    let index = if op == b'q' {
                        self.uint(1)?
                    } else {
                        self.uint(4)?
                    } as u32;
                    let top = self.top()?.clone();
                    self.memo.insert(index, top);
                }
                b'h' | b'j' => {
                    let index = if op == b'h' {
                        self.uint(1)?
                    } else {
                        self.uint(4)?
                    } as u32;
                    let value =
                        self.memo.get(&index).cloned().ok_or_else(|| {
                            self.malformed(format!("memo {index} was never stored"))
                        })?;
                    self.stack.push(value);
                }
                b'a' => {
                    let item = self.pop()?;
                    self.append(vec![item])?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    self.append(items)?;
                }
                b's' => {
                    let value = self.pop()?;
                    let key = self.pop()?;
                    self.set_items(vec![key, value])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    self.set_items(items)?;
                }
                b't' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Obj::Tuple(Rc::from(items)));
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    if self.stack.len() < n {
                        return Err(self.malformed("TUPLE on too short a stack"));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.stack.push(Obj::Tuple(Rc::from(items)));
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Obj::List(Rc::new(RefCell::new(items))));
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Obj::Dict(Rc::default()));
                    self.set_items(items)?;
                }
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let top = self.top()?.clone();
                    self.stack.push(top);
                }
                0x97 | 0x98 => {
                    return Err(PickleError::Opcode {
                        at,
                        op,
                        what: "an out-of-band buffer (pickle.dumps(…, buffer_callback=…)); pickle in-band",
                    });
                }
                _ => {
                    return Err(PickleError::Opcode {
                        at,
                        op,
                        what: "a protocol 0/1 or unknown opcode",
                    });
                }
            }
        }
    }

    fn line(&mut self) -> Result<String, PickleError> {
        let rest = &self.bytes[self.at..];
        let end = rest
            .iter()
            .position(|b| *b == b'\n')
            .ok_or(PickleError::Truncated { at: self.at })?;
        let text = String::from_utf8_lossy(&rest[..end]).into_owned();
        self.at += end + 1;
        Ok(text)
    }

    fn append(&mut self, items: Vec<Obj>) -> Result<(), PickleError> {
        match self.top()? {
            Obj::List(list) => {
                list.borrow_mut().extend(items);
                Ok(())
            }
            other => {
                let found = other.describe();
                Err(self.malformed(format!("APPEND to {found}")))
            }
        }
    }

    fn set_items(&mut self, items: Vec<Obj>) -> Result<(), PickleError> {
        if !items.len().is_multiple_of(2) {
            return Err(self.malformed("SETITEMS with an odd number of items"));
        }
        match self.top()? {
            Obj::Dict(dict) => {
                let mut dict = dict.borrow_mut();
                let mut items = items.into_iter();
                while let (Some(k), Some(v)) = (items.next(), items.next()) {
                    dict.push((k, v));
                }
                Ok(())
            }
            other => {
                let found = other.describe();
                Err(self.malformed(format!("SETITEM on {found}")))
            }
        }
    }
}

/// A numpy array's contents.
#[derive(Debug)]
enum Data {
    Objects(Vec<Obj>),
    Int(Vec<i64>),
    Float(Vec<f64>),
    Bool(Vec<bool>),
}

#[derive(Debug)]
struct Array {
    shape: Vec<usize>,
    fortran: bool,
    data: Data,
}

impl Array {
    fn len(&self) -> usize {
        match &self.data {
            Data::Objects(v) => v.len(),
            Data::Int(v) => v.len(),
            Data::Float(v) => v.len(),
            Data::Bool(v) => v.len(),
        }
    }

    /// Element `(row, col)` of a 2-D array (a 1-D array is one row).
    fn flat_index(&self, row: usize, col: usize) -> usize {
        let (rows, cols) = match self.shape[..] {
            [r, c] => (r, c),
            [c] => (1, c),
            _ => (0, 0),
        };
        if self.fortran {
            col * rows + row
        } else {
            row * cols + col
        }
    }

    fn cell(&self, index: usize, column: &str) -> Result<Value, PickleError> {
        Ok(match &self.data {
            Data::Objects(v) => to_json(&v[index], column)?,
            Data::Int(v) => Value::from(v[index]),
            Data::Float(v) => Number::from_f64(v[index]).map_or(Value::Null, Value::Number),
            Data::Bool(v) => Value::Bool(v[index]),
        })
    }
}

fn not_frame(problem: impl Into<String>) -> PickleError {
    PickleError::NotADataFrame {
        problem: problem.into(),
    }
}

/// numpy's dtype object: `dtype(code, False, True)` + `BUILD((3, byteorder, …))`.
fn dtype(obj: &Obj) -> Result<(String, String), String> {
    let i = obj
        .instance_of("dtype")
        .ok_or_else(|| format!("expected a numpy dtype, found {}", obj.describe()))?;
    let code = i
        .args
        .items()
        .and_then(|a| a.first().and_then(|c| c.as_str().map(str::to_string)))
        .ok_or("a dtype without a type code")?;
    let order = i
        .state
        .borrow()
        .as_ref()
        .and_then(Obj::items)
        .and_then(|s| s.get(1).and_then(|o| o.as_str().map(str::to_string)))
        .unwrap_or_else(|| "|".to_string());
    Ok((code, order))
}

fn usize_of(obj: &Obj) -> Option<usize> {
    match obj {
        Obj::Int(v) => usize::try_from(*v).ok(),
        _ => None,
    }
}

/// A numpy array in either of numpy's pickled forms.
fn array(obj: &Obj) -> Result<Array, String> {
    let (shape, dtype_obj, fortran, raw) = if let Some(i) = obj.instance_of("_reconstruct") {
        let state = i
            .state
            .borrow()
            .as_ref()
            .and_then(Obj::items)
            .ok_or("a numpy array without its state")?;
        // (version, shape, dtype, is_fortran, rawdata), or the same without the version.
        let s = if state.len() == 5 {
            &state[1..]
        } else {
            &state[..]
        };
        let [shape, dtype, fortran, raw] = s else {
            return Err(format!("a numpy array state of {} items", state.len()));
        };
        (
            shape.clone(),
            dtype.clone(),
            matches!(fortran, Obj::Bool(true)),
            raw.clone(),
        )
    } else if let Some(i) = obj.instance_of("_frombuffer") {
        let args = i.args.items().ok_or("_frombuffer without arguments")?;
        let [raw, dtype, shape, order] = &args[..] else {
            return Err("_frombuffer with unexpected arguments".into());
        };
        (
            shape.clone(),
            dtype.clone(),
            order.as_str() == Some("F"),
            raw.clone(),
        )
    } else {
        return Err(format!("expected a numpy array, found {}", obj.describe()));
    };
    let shape: Vec<usize> = shape
        .items()
        .ok_or("a numpy shape that is not a tuple")?
        .iter()
        .map(|d| usize_of(d).ok_or("a negative numpy dimension"))
        .collect::<Result<_, _>>()?;
    let (code, order) = dtype(&dtype_obj)?;
    let data = if code == "O8" || code == "O4" {
        Data::Objects(
            raw.items()
                .ok_or("an object array whose data is not a list")?,
        )
    } else {
        if order == ">" {
            return Err(format!("big-endian numpy data ({order}{code})"));
        }
        let bytes: Vec<u8> = match &raw {
            Obj::Bytes(b) => b.to_vec(),
            // Protocol 2 writes bytes as `_codecs.encode(text, "latin1")`.
            Obj::Instance(i) if i.callable.global() == Some(("_codecs", "encode")) => i
                .args
                .items()
                .and_then(|a| {
                    a.first()
                        .and_then(|t| t.as_str().map(|s| s.chars().map(|c| c as u8).collect()))
                })
                .ok_or("_codecs.encode without text")?,
            other => return Err(format!("numeric numpy data held as {}", other.describe())),
        };
        let words = |n: usize| bytes.chunks_exact(n);
        match code.as_str() {
            "i8" => Data::Int(
                words(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
            ),
            "i4" => Data::Int(
                words(4)
                    .map(|c| i64::from(i32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))
                    .collect(),
            ),
            "i2" => Data::Int(
                words(2)
                    .map(|c| i64::from(i16::from_le_bytes(c.try_into().unwrap_or([0; 2]))))
                    .collect(),
            ),
            "i1" => Data::Int(bytes.iter().map(|b| i64::from(*b as i8)).collect()),
            "u4" => Data::Int(
                words(4)
                    .map(|c| i64::from(u32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))
                    .collect(),
            ),
            "u2" => Data::Int(
                words(2)
                    .map(|c| i64::from(u16::from_le_bytes(c.try_into().unwrap_or([0; 2]))))
                    .collect(),
            ),
            "u1" => Data::Int(bytes.iter().map(|b| i64::from(*b)).collect()),
            "f8" => Data::Float(
                words(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
            ),
            "f4" => Data::Float(
                words(4)
                    .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))
                    .collect(),
            ),
            "b1" => Data::Bool(bytes.iter().map(|b| *b != 0).collect()),
            other => {
                return Err(format!(
                    "numpy dtype `{other}`, which llmbench does not read"
                ));
            }
        }
    };
    let array = Array {
        shape,
        fortran,
        data,
    };
    if array.shape.iter().product::<usize>() != array.len() {
        return Err(format!(
            "a numpy array of shape {:?} holding {} values",
            array.shape,
            array.len()
        ));
    }
    Ok(array)
}

/// A cell as JSON: scalars, and lists/tuples/1-D arrays of them (token ids).
fn to_json(obj: &Obj, column: &str) -> Result<Value, PickleError> {
    let refuse = |what: String| PickleError::Column {
        column: column.to_string(),
        problem: format!("a cell holds {what}, which llmbench does not read"),
    };
    Ok(match obj {
        Obj::None => Value::Null,
        Obj::Bool(b) => Value::Bool(*b),
        Obj::Int(v) => Value::from(*v),
        Obj::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Obj::Str(s) => Value::String(s.to_string()),
        Obj::Tuple(_) | Obj::List(_) => Value::Array(
            obj.items()
                .unwrap_or_default()
                .iter()
                .map(|item| to_json(item, column))
                .collect::<Result<_, _>>()?,
        ),
        Obj::Instance(_)
            if obj.instance_of("_reconstruct").is_some()
                || obj.instance_of("_frombuffer").is_some() =>
        {
            let a = array(obj).map_err(refuse)?;
            if a.shape.len() != 1 {
                return Err(refuse(format!("a {}-D numpy array", a.shape.len())));
            }
            Value::Array(
                (0..a.len())
                    .map(|i| a.cell(i, column))
                    .collect::<Result<_, _>>()?,
            )
        }
        other => return Err(refuse(other.describe())),
    })
}

/// The labels of an index: `_new_Index(cls, {"data": …})`, or a `RangeIndex`'s length.
enum Labels {
    Names(Vec<String>),
    Range(usize),
}

fn index(obj: &Obj) -> Result<Labels, PickleError> {
    let i = obj
        .instance_of("_new_Index")
        .ok_or_else(|| not_frame(format!("an axis is {}, not a pandas index", obj.describe())))?;
    let args = i.args.items().unwrap_or_default();
    let (Some(cls), Some(fields)) = (args.first(), args.get(1)) else {
        return Err(not_frame("_new_Index without its class and fields"));
    };
    if cls.global().is_some_and(|(_, n)| n == "RangeIndex") {
        let get = |k: &str| match fields.get(k) {
            Some(Obj::Int(v)) => Some(v),
            _ => None,
        };
        let (start, stop) = (get("start").unwrap_or(0), get("stop").unwrap_or(0));
        let step = get("step").unwrap_or(1).max(1);
        return Ok(Labels::Range(
            usize::try_from((stop - start).max(0) / step).unwrap_or(0)
                + usize::from((stop - start).max(0) % step != 0),
        ));
    }
    let data = fields
        .get("data")
        .ok_or_else(|| not_frame("an index without data"))?;
    // pandas 3 keeps string labels in a StringArray: `BUILD((StringDtype, ndarray))`.
    let data = match data.instance_of("__pyx_unpickle_NDArrayBacked") {
        Some(backed) => backed
            .state
            .borrow()
            .as_ref()
            .and_then(Obj::items)
            .and_then(|s| s.get(1).cloned())
            .ok_or_else(|| not_frame("a pandas array without its data"))?,
        None => data,
    };
    let a = array(&data).map_err(not_frame)?;
    let names = (0..a.len())
        .map(|i| match a.cell(i, "(index)")? {
            Value::String(s) => Ok(s),
            other => Ok(other.to_string()),
        })
        .collect::<Result<_, PickleError>>()?;
    Ok(Labels::Names(names))
}

/// A block's column positions: a slice, or an array of positions.
fn placement(obj: &Obj, width: usize) -> Result<Vec<usize>, PickleError> {
    if let Some(s) = obj.instance_of("slice") {
        let args = s.args.items().unwrap_or_default();
        let part = |k: usize, default: usize| args.get(k).and_then(usize_of).unwrap_or(default);
        let (start, stop, step) = (part(0, 0), part(1, width), part(2, 1).max(1));
        return Ok((start..stop).step_by(step).collect());
    }
    let a = array(obj).map_err(not_frame)?;
    match a.data {
        Data::Int(v) => v
            .into_iter()
            .map(|p| usize::try_from(p).map_err(|_| not_frame("a negative block position")))
            .collect(),
        _ => Err(not_frame("block positions that are not integers")),
    }
}

/// The DataFrame in `bytes` as records, in row order: one JSON object per row, one key per column.
pub fn read_dataframe(bytes: &[u8]) -> Result<Vec<Map<String, Value>>, PickleError> {
    let root = unpickle(bytes)?;
    let frame = root
        .instance_of("DataFrame")
        .ok_or_else(|| not_frame(format!("the pickle holds {}", root.describe())))?;
    let state = frame.state.borrow().clone().unwrap_or(Obj::None);
    let mgr = state
        .get("_mgr")
        .or_else(|| state.get("_data"))
        .ok_or_else(|| not_frame("a DataFrame without its block manager (`_mgr`)"))?;
    let manager = mgr
        .instance_of("BlockManager")
        .ok_or_else(|| not_frame(format!("the block manager is {}", mgr.describe())))?;
    // (values, positions) of every block, and the axes.
    let (blocks, axes): (Vec<(Obj, Obj)>, Vec<Obj>) = match manager.args.items() {
        Some(args) if args.len() == 2 => {
            let blocks = args[0]
                .items()
                .unwrap_or_default()
                .iter()
                .map(|b| {
                    let i = b
                        .instance_of("_unpickle_block")
                        .ok_or_else(|| not_frame(format!("a block is {}", b.describe())))?;
                    let a = i.args.items().unwrap_or_default();
                    match (a.first(), a.get(1)) {
                        (Some(v), Some(p)) => Ok((v.clone(), p.clone())),
                        _ => Err(not_frame("_unpickle_block without values and placement")),
                    }
                })
                .collect::<Result<_, PickleError>>()?;
            (blocks, args[1].items().unwrap_or_default())
        }
        _ => {
            // pandas before 1.x pickled the manager's state (`__getstate__`, the "0.14.1" dict) instead; no
            // current pandas writes it and none is tested here.
            return Err(not_frame(
                "a BlockManager pickled without `__reduce__` (pandas older than 1.5?); re-pickle it with a current \
                 pandas (pd.read_pickle(p).to_pickle(p))",
            ));
        }
    };
    let (Some(columns), Some(rows)) = (axes.first(), axes.get(1)) else {
        return Err(not_frame("a block manager without two axes"));
    };
    let Labels::Names(columns) = index(columns)? else {
        return Err(not_frame(
            "a DataFrame whose columns are a RangeIndex has no column names to read",
        ));
    };
    let rows = match index(rows)? {
        Labels::Range(n) => n,
        Labels::Names(labels) => labels.len(),
    };
    let mut table: Vec<Option<Vec<Value>>> = vec![None; columns.len()];
    for (values, positions) in &blocks {
        let positions = placement(positions, columns.len())?;
        let name = |p: usize| columns.get(p).cloned().unwrap_or_else(|| format!("#{p}"));
        let a = array(values).map_err(|problem| PickleError::Column {
            column: positions.first().map_or_else(String::new, |p| name(*p)),
            problem,
        })?;
        let (height, width) = match a.shape[..] {
            [h, w] => (h, w),
            [w] => (1, w),
            _ => return Err(not_frame(format!("a block of shape {:?}", a.shape))),
        };
        if height != positions.len() || width != rows {
            return Err(not_frame(format!(
                "a block of shape {:?} for {} columns of {rows} rows",
                a.shape,
                positions.len()
            )));
        }
        for (row_in_block, &p) in positions.iter().enumerate() {
            let column = name(p);
            let cells = (0..rows)
                .map(|r| a.cell(a.flat_index(row_in_block, r), &column))
                .collect::<Result<Vec<_>, _>>()?;
            let slot = table.get_mut(p).ok_or_else(|| {
                not_frame(format!(
                    "a block places a column at {p} of {}",
                    columns.len()
                ))
            })?;
            *slot = Some(cells);
        }
    }
    let table: Vec<Vec<Value>> = table
        .into_iter()
        .enumerate()
        .map(|(p, c)| c.ok_or_else(|| not_frame(format!("column `{}` is in no block", columns[p]))))
        .collect::<Result<_, _>>()?;
    Ok((0..rows)
        .map(|r| {
            columns
                .iter()
                .zip(&table)
                .map(|(name, cells)| (name.clone(), cells[r].clone()))
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../launcher/tests/fixtures/mlperf-pickles")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The frame `make_fixtures.py` writes, row by row, in its column order (NaN and None read as null).
    fn expected() -> Vec<Value> {
        vec![
            json!({"dataset": "orca", "input": "Hello world", "tok_input": [1, 15043, 3186], "output": "Hi!",
                   "tok_input_length": 3, "ratio": 0.5, "small": -7}),
            json!({"dataset": "cnn", "input": "Résumé ünïcode ✓", "tok_input": [1, 2, 3, 4], "output": "ok",
                   "tok_input_length": 4, "ratio": 1.25, "small": 0}),
            json!({"dataset": "gsm8k", "input": "third \"quoted\"\nline", "tok_input": [1, 29871],
                   "output": null, "tok_input_length": 2, "ratio": null, "small": 2147483647}),
        ]
    }

    #[test]
    fn pandas_1_2_and_3_frames_read_in_protocols_4_and_5() {
        for name in [
            "orca_pandas1_p4.pkl",
            "orca_pandas1_p5.pkl",
            "orca_pandas2_p4.pkl",
            "orca_pandas2_p5.pkl",
            "orca_pandas3_p4.pkl",
            "orca_pandas3_p5.pkl",
        ] {
            let rows = read_dataframe(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
            assert_eq!(rows, expected(), "{name}");
            // Column order is the frame's.
            let Value::Object(first) = &rows[0] else {
                panic!("a record")
            };
            assert_eq!(
                first.keys().collect::<Vec<_>>(),
                [
                    "dataset",
                    "input",
                    "tok_input",
                    "output",
                    "tok_input_length",
                    "ratio",
                    "small"
                ],
                "{name}"
            );
        }
    }

    #[test]
    fn the_machine_builds_lists_dicts_memo_and_instances() {
        // Hand-assembled protocol-2 pickle of [1, -2, 300, "é", (None, True), {"k": 1.5}, f(7)] where f is the
        // global `m.f`, with the list memoized and fetched back (so the result is the list itself):
        let mut p = vec![0x80, 2, b']', b'q', 0, b'('];
        p.extend([b'K', 1]); // 1
        p.extend([b'J', 0xfe, 0xff, 0xff, 0xff]); // -2 (4-byte two's complement)
        p.extend([b'M', 0x2c, 0x01]); // 300 = 0x012c
        p.extend([b'X', 2, 0, 0, 0, 0xc3, 0xa9]); // "é" in UTF-8
        p.extend([b'N', 0x88, 0x86]); // (None, True)
        p.extend([b'}', b'X', 1, 0, 0, 0, b'k', b'G']);
        p.extend(1.5f64.to_be_bytes()); // {"k": 1.5}
        p.push(b's');
        p.extend(b"cm\nf\n");
        p.extend([b'K', 7, 0x85, b'R']); // f((7,))
        p.extend([b'e', b'0', b'h', 0, b'.']); // APPENDS, POP, BINGET 0, STOP
        let obj = unpickle(&p).unwrap();
        let items = obj.items().unwrap();
        assert!(matches!(items[0], Obj::Int(1)));
        assert!(matches!(items[1], Obj::Int(-2)));
        assert!(matches!(items[2], Obj::Int(300)));
        assert_eq!(items[3].as_str(), Some("é"));
        assert!(
            matches!(&items[4], Obj::Tuple(t) if matches!(t[..], [Obj::None, Obj::Bool(true)]))
        );
        assert!(matches!(items[5].get("k"), Some(Obj::Float(f)) if f == 1.5));
        let call = items[6].instance_of("f").unwrap();
        assert_eq!(call.callable.global(), Some(("m", "f")));
        // LONG1: 2⁴⁰ and −1.
        let big = unpickle(&[0x80, 2, 0x8a, 6, 0, 0, 0, 0, 0, 1, b'.']).unwrap();
        assert!(matches!(big, Obj::Int(v) if v == 1 << 40));
        let minus = unpickle(&[0x80, 2, 0x8a, 1, 0xff, b'.']).unwrap();
        assert!(matches!(minus, Obj::Int(-1)));
    }

    #[test]
    fn what_is_not_a_readable_dataframe_is_refused_with_the_reason() {
        // A plain list, a truncated frame, an out-of-band buffer, protocol 0.
        let list = [0x80, 4, b']', b'.'];
        assert!(matches!(
            read_dataframe(&list),
            Err(PickleError::NotADataFrame { problem }) if problem.contains("list")
        ));
        let frame = fixture("orca_pandas3_p5.pkl");
        assert!(matches!(
            read_dataframe(&frame[..frame.len() / 2]),
            Err(PickleError::Truncated { .. })
        ));
        assert!(matches!(
            read_dataframe(&[0x80, 5, 0x97, b'.']),
            Err(PickleError::Opcode { op: 0x97, .. })
        ));
        assert!(matches!(
            read_dataframe(b"(lp0\n."),
            Err(PickleError::Opcode { op: b'(', .. }) | Err(PickleError::Opcode { .. })
        ));
        // A cell of a type llmbench does not read names its column: the frame's `output` cell replaced by bytes.
        let mut bytes_cell = fixture("orca_pandas3_p4.pkl");
        let at = bytes_cell
            .windows(5)
            .position(|w| w == [0x8c, 3, b'H', b'i', b'!'])
            .expect("the `Hi!` cell");
        bytes_cell[at] = b'C'; // SHORT_BINUNICODE → SHORT_BINBYTES, same length
        let err = read_dataframe(&bytes_cell).unwrap_err();
        assert_eq!(
            err.to_string(),
            "column `output`: a cell holds bytes, which llmbench does not read"
        );
    }
}
