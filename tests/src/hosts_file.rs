//! Names that resolve as a test says, through the resolver every process uses.

/// A line of /etc/hosts naming `name`, for the life of the test: the resolver every delivery
/// uses (getaddrinfo) reads it at each lookup, so a test can change what a name resolves to.
pub struct HostsEntry {
    name: String,
}

impl HostsEntry {
    const FILE: &'static str = "/etc/hosts";

    pub fn new(name: &str, address: &str) -> HostsEntry {
        let entry = HostsEntry {
            name: name.to_string(),
        };
        entry.point_to(address);
        entry
    }

    fn marker(&self) -> String {
        format!("# texfleet test {}", self.name)
    }

    fn others(&self) -> String {
        std::fs::read_to_string(Self::FILE)
            .expect("/etc/hosts is readable")
            .lines()
            .filter(|line| !line.ends_with(&self.marker()))
            .map(|line| format!("{line}\n"))
            .collect()
    }

    pub fn point_to(&self, address: &str) {
        let contents = format!(
            "{}{address} {} {}\n",
            self.others(),
            self.name,
            self.marker()
        );
        std::fs::write(Self::FILE, contents)
            .expect("the tests run as root and may edit /etc/hosts");
    }
}

impl Drop for HostsEntry {
    fn drop(&mut self) {
        std::fs::write(Self::FILE, self.others()).ok();
    }
}
