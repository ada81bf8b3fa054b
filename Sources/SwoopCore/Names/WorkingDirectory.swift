/// The hidden directory, one in each directory that receives downloads, where their partial
/// state (part files and segment maps) lives: `DIR/.swoop/`. No download's target may be inside
/// one, and a listed key that names one is skipped, so no object can land on a working file.
package enum WorkingDirectory {
    package static let name = ".swoop"
}
