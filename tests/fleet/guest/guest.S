/* A multiboot (v1) guest for the fleet lab (tests/fleet/lab.py): 32-bit,
 * no disk, no NIC. QEMU loads it through libvirt's <os><kernel>. It idles
 * with `hlt` (woken only by the BIOS PIT, IRQ0 at 18.2 Hz) or spins, and
 * switches on the keyboard: scancode set 1 (SeaBIOS enables the i8042's
 * translation) 0x30 'b' = busy, 0x17 'i' = idle, 0x20 'd' = dirty (on every
 * PIT tick it rewrites one word in each 4 KiB page of 16 MiB, then halts:
 * ~290 MiB/s of dirty RAM for little CPU, so a live migration limited to
 * 1 MiB/s (virsh migrate-setspeed) never converges), sent from
 * outside with `virsh send-key VM KEY_B|KEY_I|KEY_D`. It starts idle. The
 * mode is in guest RAM (ebx), so it survives a live migration.
 *
 * Build: cc -m32 -c guest.S && ld -m elf_i386 -Ttext=0x100000 (meson.build). */

#define MB_MAGIC 0x1BADB002
#define MB_FLAGS 0x0 /* ELF image: QEMU takes the load address from it */

#define SC_B 0x30
#define SC_I 0x17
#define SC_D 0x20

#define DIRTY_START 0x400000  /* 4 MiB: above this image */
#define DIRTY_END   0x1400000 /* +16 MiB, below the 128 MiB of RAM */

	.section .text
	.code32
	.globl _start

	.align 4
mb_header:
	.long MB_MAGIC
	.long MB_FLAGS
	.long -(MB_MAGIC + MB_FLAGS)

_start:
	cli
	lgdt gdt_ptr
	ljmp $0x08, $1f /* reload CS from our own GDT: the loader's may be gone */
1:	movw $0x10, %ax
	movw %ax, %ds
	movw %ax, %es
	movw %ax, %ss
	movw %ax, %fs
	movw %ax, %gs
	movl $stack_top, %esp

	/* 256 interrupt gates, all to `isr`: whatever vector the BIOS gave
	 * the PIC (0x08 master), the stub sends EOI and returns. */
	movl $idt, %edi
	movl $isr, %eax
	movl $256, %ecx
2:	movw %ax, (%edi)        /* offset 15:0 */
	movw $0x08, 2(%edi)     /* code selector */
	movw $0x8e00, 4(%edi)   /* present, DPL 0, 32-bit interrupt gate */
	movl %eax, %edx
	shrl $16, %edx
	movw %dx, 6(%edi)       /* offset 31:16 */
	addl $8, %edi
	loop 2b
	lidt idt_ptr

	movb $0xfe, %al         /* master PIC: only IRQ0 (PIT) */
	outb %al, $0x21
	movb $0xff, %al         /* slave PIC: nothing */
	outb %al, $0xa1
	sti

	xorl %ebx, %ebx         /* ebx: 0 idle, 1 busy, 2 dirty */
main_loop:
	inb $0x64, %al          /* i8042 status: bit 0 = output buffer full */
	testb $1, %al
	jz 4f
	inb $0x60, %al
	cmpb $SC_B, %al
	jne 3f
	movl $1, %ebx
3:	cmpb $SC_D, %al
	jne 3f
	movl $2, %ebx
3:	cmpb $SC_I, %al
	jne 4f
	xorl %ebx, %ebx
4:	cmpl $1, %ebx
	je busy
	ja dirty
	hlt                     /* idle: sleep until the next PIT tick */
	jmp main_loop
dirty:
	movl $DIRTY_START, %edi
6:	incl (%edi)
	addl $4096, %edi
	cmpl $DIRTY_END, %edi
	jb 6b
	hlt                     /* one pass per PIT tick */
	jmp main_loop
busy:
	movl $100000, %ecx      /* spin a while between keyboard polls */
5:	loop 5b
	jmp main_loop

isr:
	pushl %eax
	movb $0x20, %al         /* EOI to the master PIC */
	outb %al, $0x20
	popl %eax
	iret

	.section .data
	.align 8
gdt:
	.quad 0x0000000000000000
	.quad 0x00cf9a000000ffff /* 0x08: code, base 0, 4 GiB, 32-bit */
	.quad 0x00cf92000000ffff /* 0x10: data, base 0, 4 GiB */
gdt_end:
gdt_ptr:
	.word gdt_end - gdt - 1
	.long gdt
idt_ptr:
	.word 256 * 8 - 1
	.long idt

	.align 8
idt:
	.fill 256 * 8, 1, 0
	.align 16
stack:
	.fill 4096, 1, 0
stack_top:
